#!/usr/bin/env bash
# Runs every test of kuryr-rs, installing what it needs: starts the lab (real Kubernetes + Keystone + Neutron on
# ML2/OVN + Octavia; cached after the first run), then formatting and lint checks, builds every test, runs the VM
# node's tests (its qemu guest up only around them), then every other unit and integration test of the workspace
# against that lab, several binaries at a time (lab/run-tests); every fuzz target runs for 30 s (fuzz/run,
# docs/fuzzing.md) beside the VM node's tests.
# Idempotent; leaves the lab running (`lab/lab down` stops it).
set -euo pipefail
cd "$(dirname "$0")"
[ "$(id -u)" = 0 ] || { echo "test.sh needs root (the lab makes network namespaces and OVS bridges)" >&2; exit 1; }

declare -a STAGES=()
stage() { # NAME CMD...: run and time one stage
  local name=$1 t0 rc; shift
  t0=$(date +%s.%N)
  echo "=== [$name] $*"
  set +e; "$@"; rc=$?; set -e
  STAGES+=("$(printf '%-10s %7.1fs  %s' "$name" "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{print a-b}')" "$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")")")
  if [ $rc != 0 ]; then report; exit $rc; fi
}
report() { echo "=== stage timings"; printf '  %s\n' "${STAGES[@]}"; }

command -v cargo >/dev/null || { echo "cargo is not installed" >&2; exit 1; }
cargo fmt --version >/dev/null 2>&1 || { echo "rustfmt is missing (rustup component add rustfmt)" >&2; exit 1; }
cargo clippy --version >/dev/null 2>&1 || { echo "clippy is missing (rustup component add clippy)" >&2; exit 1; }

# The build cache is shared by every checkout (.cargo/config.toml), and cargo keys the workspace's own
# artifacts by paths relative to the workspace: a test binary built in another checkout whose sources were
# not newer is reused, with that checkout's CARGO_MANIFEST_DIR compiled in (fixtures then read from a path
# that may be gone). When the checkout changes, the workspace's own artifacts are rebuilt (not the deps).
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
if [ "$(cat "$target/.kuryr-checkout" 2>/dev/null)" != "$PWD" ]; then
  echo "=== build cache last used by $(cat "$target/.kuryr-checkout" 2>/dev/null || echo 'another checkout'): rebuilding this workspace's own crates"
  cargo clean --workspace --quiet
  mkdir -p "$target" && echo "$PWD" >"$target/.kuryr-checkout"
fi
stage lab lab/lab up
# kuryr-rs installed from its image (by ./demo.sh) is left running: uninstalling it would leave the demo's pods
# without a controller (no new pod of theirs wired, none deleted: their finalizers stay) and release the
# `kubernetes` Service's load balancer they read the API through. The tests run controllers of their own in
# namespaces of their own and read whichever kuryr-daemons serve the kubelet nodes; ops_install, which
# installs and uninstalls kuryr-rs itself, skips then and says why.
if [ -f "${KURYR_LAB_STATE:-/var/lib/kuryr-lab}/nodes/kuryr-installed" ]; then
  echo "=== kuryr-rs is installed from its image ($(lab/lab kuryr status | head -1)): left running;" \
    "the kubelet nodes' pods are wired by its kuryr-daemon, not this tree's, and ops_install skips" \
    "(lab/lab kuryr uninstall first for a run on this tree's daemons alone)"
fi
stage fmt cargo fmt --all -- --check
stage clippy cargo clippy --workspace --all-targets --locked -- -D warnings
# The fuzz targets are their own workspace (fuzz/Cargo.toml): lint them here too, so a changed core API fails in
# minutes rather than after the integration tests.
stage fuzzlint cargo clippy --manifest-path fuzz/Cargo.toml --bins --locked \
  --target-dir "${KURYR_FUZZ_CACHE:-/var/cache/kuryr-rs}/fuzz-target/check" -- -D warnings
# The tests that need the VM node in stages of their own: nested-vlan end to end (tests/vm_nodes.rs) and routed
# traffic to nested-macvlan pods from every kind of client, the VM's pods included (tests/macvlan_services.rs).
# The guest (TCG) idles at about a third of a core, so it runs only around them; the workspace run below skips
# those two tests.
# Every test binary, built once before any runs. `cargo test --no-run` also builds the workspace binaries the tests
# start (kuryr-controller, kuryr-daemon, kuryr-cni, kuryrctl: each package's integration tests need its own), with
# the test build's features; KURYR_WORKSPACE_BINARIES tells the tests to take those (lab_tests::cluster::
# workspace_binary) rather than `cargo build -p` each again with its package's features (51 s on 2 cores).
build() {
  local b
  cargo test --workspace --locked --no-run || return 1
  for b in kuryr-controller kuryr-daemon kuryr-cni kuryrctl; do
    [ -x "$target/debug/$b" ] || { echo "build: $target/debug/$b was not built" >&2; return 1; }
  done
}
stage build build
export KURYR_WORKSPACE_BINARIES=$target/debug
# The image that ops_install and the e2e stage install (deploy/image/build: a release build of this commit, once
# per commit: 227 s of both cores on a quick machine, 8 min on CI's slow one of stop 49, where ops_install waited
# for it with nothing else running) is built from here on at the lowest priority, in the CPU the VM node's tests
# and the lab's waits leave idle. Its lock makes a later caller wait for it, then find the archive.
image_log=${KURYR_FUZZ_CACHE:-/var/cache/kuryr-rs}/image-build-test-sh.log
# (setsid: its own process group, so that an early exit stops the cargo under it too. Not for a tree with
# uncommitted changes: each caller rebuilds a -dirty image.)
image_pid=0 fuzz_pid=0
stop_background() { # the image build's process group and the fuzz run, whichever were started
  [ "$image_pid" = 0 ] || kill -- -"$image_pid" 2>/dev/null || true
  [ "$fuzz_pid" = 0 ] || kill "$fuzz_pid" 2>/dev/null || true
}
trap stop_background EXIT
if [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  # Its Debian packages first, in the foreground: the VM node's guest copies this machine's /etc as it boots,
  # and an apt run beside it (ca-certificates rewriting its bundle) broke that copy on a new machine.
  deploy/image/build --packages-only --quiet
  setsid nice -n 19 deploy/image/build --quiet >"$image_log" 2>&1 & image_pid=$!
fi
stage vms lab/lab vms up
# The fuzz targets (fuzz/run: one at a time, 30 s each, one core) run beside the VM node's tests, which mostly
# wait on the guest (it idles at a third of a core); the fuzz stage below waits for them and prints their output.
fuzz_log=${KURYR_FUZZ_CACHE:-/var/cache/kuryr-rs}/fuzz-logs/test-sh.log
mkdir -p "$(dirname "$fuzz_log")"
fuzz/run >"$fuzz_log" 2>&1 & fuzz_pid=$!
fuzz_wait() { local rc=0; wait "$fuzz_pid" || rc=$?; grep -v '^ *Compiling ' "$fuzz_log"; return $rc; }
# (lab/run-tests runs the binaries the build stage made: `cargo test -p lab-tests` would compile them again, with
# the features of that package alone.)
stage vmtest lab/run-tests --lanes 1 --only vm_nodes --only macvlan_services
stage vmsdown lab/lab vms down
# The rest, several test binaries at a time (lab/run-tests: which share the lab and which run alone).
stage test lab/run-tests --lanes "${KURYR_TEST_LANES:-3}" --skip vm_nodes --skip macvlan_services
# Kubernetes' own DNS conformance cases (docs/conformance.md: 8 cases, ~3 min): cluster DNS through kuryr-rs's
# kube-dns load balancer, pods and Services by name, and the API server reaching pods (its egress selector).
# kuryr-rs is installed from its image for them and uninstalled after (left as it is when ./demo.sh installed it).
stage e2e lab/e2e --set dns --install
stage fuzz fuzz_wait
report
