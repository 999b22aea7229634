#!/bin/bash
# docs/map.md's list of every source file, made from the tree: each C file
# of the rooms with the first sentence of its header comment, between the
# markers below.  scripts/mkmap.sh rewrites the list; --check fails (and
# says which files) when the list and the tree differ, for layering.sh.
set -eu
cd "$(dirname "$0")/.."
MAP=${MAP:-docs/map.md}	# another map: layering.sh checks the check
BEGIN='<!-- the files, made by scripts/mkmap.sh: do not edit by hand -->'
END='<!-- end of the files -->'

# The first sentence (cut at 110 bytes) of FILE's first comment, after the
# SPDX line.
summary() {
	awk '
		NR <= 2 && /SPDX-License-Identifier/ { next }
		!on && /^\/\*/ { on = 1; sub(/^\/\*+ ?/, "") }
		!on { next }
		{ sub(/^ *\* ?/, ""); end = sub(/\*\/.*/, "") }
		on && $0 == "" && text != "" { exit }
		{ text = text (text == "" ? "" : " ") $0 }
		end || text ~ /\.( |$)/ { exit }
		END {
			sub(/\. .*/, ".", text); sub(/:$/, "", text)
			if (length(text) > 110) text = substr(text, 1, 107) "..."
			print text
		}' "$1"
}

files() {
	# by folder, then name: a folder's own files in one block
	find lib events symbols unwind vmm host guest-kmod -name '*.[ch]' \
		! -name '*.pb-c.[ch]' | sed 's#/\([^/]*\)$#\t\1#' | LC_ALL=C sort |
		tr '\t' /
}

list() {
	local f dir last=""
	echo "$BEGIN"
	files | while IFS= read -r f; do
		dir=${f%/*}
		if [ "$dir" != "$last" ]; then
			printf '\n**%s/**\n\n' "$dir"
			last=$dir
		fi
		printf -- '- `%s`: %s\n' "${f##*/}" "$(summary "$f")"
	done
	echo
	echo "$END"
}

current() {
	awk -v b="$BEGIN" -v e="$END" '$0 == b { on = 1 } on { print } $0 == e { on = 0 }' "$MAP"
}

if [ "${1:-}" = --check ]; then
	grep -qxF "$BEGIN" "$MAP" || { echo "FAIL: $MAP has no file list: run scripts/mkmap.sh"; exit 1; }
	if ! diff <(current) <(list) >/dev/null; then
		echo "FAIL: $MAP's file list differs from the tree (run scripts/mkmap.sh):"
		diff <(current) <(list) | grep '^[<>] - ' | head -20
		exit 1
	fi
	exit 0
fi
if grep -qxF "$BEGIN" "$MAP"; then
	awk -v b="$BEGIN" -v e="$END" -v new="$(list)" '
		$0 == b { print new; skip = 1; next }
		$0 == e { skip = 0; next }
		!skip { print }' "$MAP" >"$MAP.tmp"
else
	{ cat "$MAP"; printf '\n## Every file\n\nOne line each, the first sentence of its header comment.\n\n'; list; } >"$MAP.tmp"
fi
mv "$MAP.tmp" "$MAP"
