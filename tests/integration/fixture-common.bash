# Shared by tests/integration/export-*.sh and report-debuginfod.sh (sourced,
# not run: the runner only runs *.sh), from the top of the tree.
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}

# fixture_tmp NAME: fails unless opvm is built; tmp = a new absolute
# directory under $BUILD/tmp (the caller's trap removes it).
fixture_tmp() {
	[ -x "$OPVM" ] || { echo "FAIL: $OPVM not built"; exit 1; }
	tmp=$(mkdir -p "$BUILD/tmp" && mktemp -d "$BUILD/tmp/$1.XXXXXX") || exit 1
	tmp=$(cd "$tmp" && pwd)
}
#
# make_fixture DIR: builds tests/golden/mkfixture.c against $BUILD's
# libraries, runs it to write the report fixture (tests/golden/fixture.h:
# binaries compiled with cc -g -O1, a real sample tree written with the
# store API) under DIR, and sets root (the guest root) and session.  Fails
# the test (exit 1) if either step does.
make_fixture() {
	local dir=$1 libs="" san="" l
	for l in libhost libvmm libunwind libsymbols libevents liblib; do libs="$libs $BUILD/$l.a"; done
	# libraries of a SAN= build need the sanitizer runtimes
	nm "$BUILD/libhost.a" 2>/dev/null | grep -q __asan_ && san="-fsanitize=address,undefined"
	nm "$BUILD/libhost.a" 2>/dev/null | grep -q __ubsan_ && [ -z "$san" ] && san="-fsanitize=undefined"
	# shellcheck disable=SC2046,SC2086
	cc -std=c11 -D_GNU_SOURCE -O1 $san -I. $(pkg-config --cflags libelf libdw jansson) \
		-o "$dir/mkfixture" tests/golden/mkfixture.c $libs \
		$(pkg-config --libs libelf libdw capstone jansson libvirt libvirt-qemu zlib \
		  libprotobuf-c libdebuginfod liblzma) -lpthread -lm || { echo "FAIL: cannot build mkfixture"; exit 1; }
	read -r root session < <("$dir/mkfixture" "$dir") || { echo "FAIL: fixture"; exit 1; }
}
