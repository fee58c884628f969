# The two commands of the README. Both install what is missing first.
.PHONY: quickstart test check setup

ISOLAB := target/release/isolab

setup:
	scripts/setup.sh

# Sets up, then runs the built-in quick-start experiment and writes its report.
quickstart: setup
	cargo build --release --locked -p isolab
	$(ISOLAB) run

# Sets up, then runs every check: formatting, clippy (warnings are errors), and all
# tests (privileged ones run for real as root).
test: setup
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	cargo test --workspace --locked

check: test
