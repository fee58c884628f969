# The two commands of the README. Both install what is missing first.
.PHONY: quickstart test test-fast check setup setup-test image image-debug install-man deny

# cargo's target directory: $CARGO_TARGET_DIR when set (cargo builds there), else target.
TARGET := $(or $(CARGO_TARGET_DIR),target)
ISOLAB := $(TARGET)/release/isolab
# The root filesystem of the `isolab` platform (and later of every engine).
IMAGE := /var/lib/isolab/images/bench
# The bench image plus docker.io: the guest of `vm+docker` (its root test uses it).
DOCKER_IMAGE := /var/lib/isolab/images/bench-docker

# What the quick start needs (the build, sysbench, mmdebstrap); `setup-test` installs every
# tier (scripts/setup.sh --help lists them).
setup:
	scripts/setup.sh quickstart

setup-test:
	scripts/setup.sh test

# The bench image (Debian bookworm with sysbench, fio, stress-ng, iperf3): the bench
# recipe, built once with mmdebstrap (about 1.5 minutes) into
# /var/lib/isolab/images/recipe-<hash>, the image every spec without its own image
# uses; $(IMAGE) is a symlink to it, for the tools and tests that take a directory. For
# the tests also bench-docker (the same plus docker.io, about a minute more), the
# guest of `vm+docker`, likewise. A cached recipe is not built again; an $(IMAGE) that
# is a real directory (built before recipes) is left as it is.
image: setup
	cargo build --release --locked -p isolab -p isolab-runtime
	$(ISOLAB) image ensure --link $(IMAGE) >/dev/null
	@$(MAKE) --no-print-directory install-man

# As root: isolab's manual pages (`man isolab`, `man isolab-run`, …) and its bash
# completions, both generated from the binary's own definitions; skipped otherwise.
install-man:
	@if [ "$$(id -u)" -eq 0 ]; then \
	    $(ISOLAB) man --dir /usr/local/share/man/man1 && \
	    mkdir -p /usr/local/share/bash-completion/completions && \
	    $(ISOLAB) completions bash > /usr/local/share/bash-completion/completions/isolab && \
	    echo "installed: man pages in /usr/local/share/man/man1, bash completions"; \
	else echo "not root: man pages and completions not installed (isolab man, isolab completions)"; fi

image-debug: setup-test
	cargo build --locked -p isolab -p isolab-runtime
	$(TARGET)/debug/isolab image ensure --link $(IMAGE) >/dev/null
	$(TARGET)/debug/isolab image ensure --packages docker.io --link $(DOCKER_IMAGE) >/dev/null

# Sets up, then runs the built-in quick-start experiment and writes its report.
quickstart: image
	$(ISOLAB) run

# Sets up, then runs every check: the dependency policy (`deny`), formatting, clippy
# (warnings are errors), and all tests (privileged ones run for real as root; the isolab
# platform's on the image).
test: image-debug deny
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	cargo test --workspace --locked

# The inner loop, about 3 minutes after a build: formatting, every crate's unit tests and
# the integration tests that need no root, no guest and no image (statistics against
# reference values, parsers on recorded tool output, the report and its HTML in
# Chromium, the runner on a fake host). It installs nothing; `make test` stays the whole
# suite that CI runs.
test-fast:
	cargo fmt --all -- --check
	cargo test --workspace --locked --lib --bins
	cargo test --locked -p isolab-stats --test reference
	cargo test --locked -p isolab-workloads --test parsers
	cargo test --locked -p isolab-report --test report --test plots --test fleet --test browser
	cargo test --locked -p isolab-lab --test fake_launcher

check: test

# The dependency policy: every locked dependency builds with the workspace's rust-version
# (scripts/check-msrv.py), then cargo-deny's checks of deny.toml (advisories, licences,
# duplicate versions, sources); `scripts/setup.sh test` installs cargo-deny. Its
# advisories need the RustSec database, a git repository on GitHub: where that cannot be
# fetched (CI reaches package registries only) this says that advisories were NOT
# checked, and why, and checks the rest. `make deny ADVISORY_DB=DIR` checks against a
# local clone of github.com/rustsec/advisory-db instead, printing its date.
CARGO_DENY := cargo-deny
deny:
	scripts/check-msrv.py
	@if [ -n "$(ADVISORY_DB)" ]; then \
		echo "advisory database: $(ADVISORY_DB), last commit $$(git -C '$(ADVISORY_DB)' log -1 --format='%h of %cs' main)"; \
		export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0='url.file://$(abspath $(ADVISORY_DB)).insteadOf' \
			GIT_CONFIG_VALUE_0=https://github.com/RustSec/advisory-db; \
	fi; \
	if $(CARGO_DENY) fetch db; then \
		$(CARGO_DENY) --locked --offline check; \
	else \
		echo "cargo deny: advisories NOT checked: the RustSec database could not be fetched (above)," \
			"so no check for vulnerable, unmaintained, unsound or yanked versions; bans, licenses and sources:"; \
		$(CARGO_DENY) --locked check bans licenses sources; \
	fi
