#!/bin/sh
# The install a mined task's bake runs in /app, with the repository's own package
# manager. The commands come from the miner (pytest_reactbench/mining/runners.py):
#
#   install.sh FIRST UNFROZEN PEERS CACHE
#
#   FIRST     the install the repository's CI runs (frozen, where it has a lockfile)
#   UNFROZEN  the install that brings a lockfile out of date with package.json up to
#             date (a merge that kept one side's lockfile, say); "" when none
#   PEERS     FIRST with npm's --legacy-peer-deps, for peer dependencies that conflict
#             (ERESOLVE); "" when the package manager is not npm
#   CACHE     the download cache, removed afterwards (it would only make the image
#             bigger); "" when none
#
# The repository's own install hooks (prepare, postinstall...) build what its
# developers need (git hooks, submodules, generated types) and often fail in a
# sandbox: a failed install is tried again without them (the dependencies' own
# scripts still run). A try that changes only the hooks is not made after the
# registry failed to serve a package; an unfrozen one still is (it may resolve
# another version). Each try says so, and its output is kept apart in a log.

first=$1 unfrozen=$2 peers=$3 cache=$4
log=$(mktemp)
kept=/tmp/reactbench-package.json
hooks="preinstall install postinstall preprepare prepare postprepare"
# What npm, pnpm and yarn (classic and berry) print when the registry has no such
# package or version: unpublished, or private to another registry.
lacks='E404|ETARGET|ERR_PNPM_FETCH_404|ERR_PNPM_NO_MATCHING_VERSION|No matching version found|404 Not Found|Package not found|YN0035'

plain() {
    sh -c "$1"
}

# The install without the repository's own hooks; package.json as it was afterwards.
bare() {
    cp package.json "$kept" || return 1
    node -e "const fs = require('fs'); const m = JSON.parse(fs.readFileSync('package.json'));
for (const hook of process.argv[1].split(' ')) delete (m.scripts || {})[hook];
fs.writeFileSync('package.json', JSON.stringify(m, null, 2));" "$hooks" || return 1
    sh -c "$1"
    rc=$?
    cp "$kept" package.json
    return $rc
}

# attempt HOW INSTALL [WHY]: one try, its output on stdout and in the log, its status.
attempt() {
    { { [ -z "$3" ] || echo "reactbench: $3" >&2; "$1" "$2"; } 2>&1; echo $? > "$log.rc"; } | tee "$log"
    [ "$(cat "$log.rc")" = 0 ]
}

registry_lacks() {
    grep -qE "$lacks" "$log"
}

installed() {
    attempt plain "$first" && return 0
    ! registry_lacks && attempt bare "$first" \
        "the install failed; once more without the install scripts of the repository itself ($hooks)" \
        && return 0
    if [ -n "$unfrozen" ]; then
        attempt plain "$unfrozen" \
            "the frozen install failed (a lockfile out of date with package.json?): once more without freezing it" \
            && return 0
        ! registry_lacks && attempt bare "$unfrozen" \
            "once more unfrozen and without the install scripts of the repository itself" && return 0
    fi
    if [ -n "$peers" ] && grep -q ERESOLVE "$log"; then
        attempt plain "$peers" "peer dependencies conflict (ERESOLVE): once more with --legacy-peer-deps" \
            && return 0
        ! registry_lacks && attempt bare "$peers" \
            "once more with --legacy-peer-deps and without the install scripts of the repository itself" \
            && return 0
    fi
    # No try got past it: the log's last such lines name the package.
    if registry_lacks; then
        echo "reactbench: the registry has no such package or version (unpublished, or kept on another registry); no install can succeed:" >&2
        grep -E "$lacks" "$log" | tail -n 2 >&2
    fi
    return 1
}

installed
rc=$?
rm -rf "$log" "$log.rc" ${cache:+"$cache"}
exit $rc
