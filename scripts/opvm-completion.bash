# bash completion for opvm.  Installed by `make install` as
# $(PREFIX)/share/bash-completion/completions/opvm.
#
# Commands are read from `opvm --help`, options from the command's own
# option table (`opvm CMD --dump-options`, the table that also drives its
# parsing, --help and man page), so completion never drifts from what the
# binary takes.
# libvirt domain names come from virsh when it is there.
_opvm()
{
	local cur prev words cword cmd opts
	_init_completion -s 2>/dev/null || {
		cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
		words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
	}
	local opvm=${words[0]}
	local i
	cmd=""
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in -*) ;; *) cmd=${words[i]}; break ;; esac
	done
	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "-v --verbose --help --version" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$("$opvm" --help 2>/dev/null |
				awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')" -- "$cur"))
		fi
		return
	fi
	if [[ $cmd == help ]]; then
		COMPREPLY=($(compgen -W "$("$opvm" --help 2>/dev/null |
			awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')" -- "$cur"))
		return
	fi
	if [[ $cur == -* ]]; then
		opts=$("$opvm" "$cmd" --dump-options 2>/dev/null | cut -f2 | grep -- '^--' | sort -u)
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	if [[ $cmd == attach ]] && command -v virsh >/dev/null 2>&1; then
		COMPREPLY=($(compgen -W "$(virsh list --name 2>/dev/null)" -- "$cur"))
		[[ ${#COMPREPLY[@]} -gt 0 ]] && return
	fi
	COMPREPLY=($(compgen -f -- "$cur"))
} &&
complete -F _opvm opvm
