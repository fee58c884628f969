# The two commands of the README. Both install what is missing first.
.PHONY: quickstart test check setup image image-debug

ISOLAB := target/release/isolab
# The root filesystem of the `isolab` platform (and later of every engine).
IMAGE := /var/lib/isolab/images/bench
# The bench image plus docker.io: the guest of `vm+docker` (its root test uses it).
DOCKER_IMAGE := /var/lib/isolab/images/bench-docker

setup:
	scripts/setup.sh

# The bench image (Debian bookworm with sysbench, fio, stress-ng, iperf3), built
# once with mmdebstrap (about 1.5 minutes) and kept; for the tests also bench-docker
# (the same plus docker.io, about a minute), the guest of `vm+docker`.
image: setup
	cargo build --release --locked -p isolab -p isolab-runtime
	test -x $(IMAGE)/bin/sh || $(ISOLAB) image build bench $(IMAGE) >/dev/null

image-debug: setup
	cargo build --locked -p isolab -p isolab-runtime
	test -x $(IMAGE)/bin/sh || target/debug/isolab image build bench $(IMAGE) >/dev/null
	test -x $(DOCKER_IMAGE)/usr/sbin/dockerd || target/debug/isolab image build bench-docker $(DOCKER_IMAGE) >/dev/null

# Sets up, then runs the built-in quick-start experiment and writes its report.
quickstart: image
	$(ISOLAB) run

# Sets up, then runs every check: formatting, clippy (warnings are errors), and all
# tests (privileged ones run for real as root; the isolab platform's on the image).
test: image-debug
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	cargo test --workspace --locked

check: test
