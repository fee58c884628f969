# The two commands of the README. Both install what is missing first.
.PHONY: quickstart test check setup image image-debug

ISOLAB := target/release/isolab
# The root filesystem of the `isolab` platform (and later of every engine).
IMAGE := /var/lib/isolab/images/bench

setup:
	scripts/setup.sh

# The bench image (Debian bookworm with sysbench, fio, stress-ng, iperf3), built
# once with mmdebstrap (about 1.5 minutes) and kept.
image: setup
	cargo build --release --locked -p isolab -p isolab-runtime
	test -x $(IMAGE)/bin/sh || $(ISOLAB) image build bench $(IMAGE) >/dev/null

image-debug: setup
	cargo build --locked -p isolab -p isolab-runtime
	test -x $(IMAGE)/bin/sh || target/debug/isolab image build bench $(IMAGE) >/dev/null

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
