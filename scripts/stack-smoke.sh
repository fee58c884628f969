#!/usr/bin/env bash
# Brings isolab's service stacks `static` and `wordpress` up on the host, the way
# isolab's host platform runs them, and tears them down again.
#
# The files are crates/isolab-workloads/src/stacks/*; their README.md gives each
# component's command, prepare, files, readiness check and the data load. This
# script repeats those templates (the lead embeds the same ones in Rust), renders
# them for a temporary working directory and free ports, and for each stack:
# writes the files (`@NAME@` placeholders rendered with sed), runs each
# component's prepare, starts its command in the background in a process group
# of its own, waits until it is ready, runs the data load, fetches the front page
# with curl and, for `wordpress`, runs the two SQL micro-operation scripts. At the
# end (also on failure or Ctrl-C) every component gets SIGTERM, then its whole
# process group SIGKILL after a grace period, and the working directory is
# removed.
#
# Needs root and Debian's mariadb-server mariadb-client nginx-light php8.2-fpm
# php8.2-mysql php8.2-cli wordpress wordpress-theme-twentytwentyone, plus curl
# and python3 (for free ports). A developer tool, not a CI test.
#
# Usage: scripts/stack-smoke.sh [static|wordpress]...   (default: both)
# Environment: INSERTS (default 10000), the micro-operation's INSERT count.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
stacks=$repo/crates/isolab-workloads/src/stacks
inserts=${INSERTS:-10000}
cpus=1
grace=10
work=$(mktemp -d /tmp/isolab-stack-smoke.XXXXXX)
declare -a pids=() names=()
child=

say() { printf '%s\n' "$*" >&2; }
die() {
	say "stack-smoke: $*"
	exit 1
}
now() { date +%s.%N; }
since() { printf '%.2f' "$(echo "$(now) - $1" | bc)"; }

# Stops every component started so far, newest first: SIGTERM to its process,
# then SIGKILL to its process group after $grace seconds; then removes $work.
cleanup() {
	local status=$? i pid
	[[ -z $child ]] || kill -TERM "$child" 2>/dev/null || true
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		pid=${pids[i]}
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq $((grace * 10))); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		wait "$pid" 2>/dev/null || true
		if kill -KILL -- "-$pid" 2>/dev/null; then
			say "stack-smoke: ${names[i]}: killed what was left of process group $pid"
		fi
	done
	if pgrep -f -- "$work" >/dev/null; then
		say "stack-smoke: processes left in $work:"
		pgrep -af -- "$work" >&2 || true
		status=1
	fi
	rm -rf "$work"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The values of the placeholders, as isolab gives them: workdir, port and cpus
# of the component being started, the endpoints of those started before it.
# Each stack has its own working directory $dir below $work.
declare -A values=()
dir=

# render TEMPLATE: replaces each {NAME} by its value (commands).
render() {
	local out=$1 name
	for name in "${!values[@]}"; do
		out=${out//"{$name}"/${values[$name]}}
	done
	case $out in *'{'*) die "unrendered placeholder in: $out" ;; esac
	printf '%s' "$out"
}

# write_file SRC DEST: renders the @NAME@ placeholders of SRC into $dir/DEST
# (`@@` is a literal `@`).
write_file() {
	local src=$1 dest=$dir/$2 args=() name
	for name in "${!values[@]}"; do
		args+=(-e "s|@$name@|${values[$name]}|g")
	done
	mkdir -p "$(dirname "$dest")"
	sed "${args[@]}" -e 's|@@|@|g' "$src" >"$dest"
	if grep -qE '@[A-Za-z0-9_.-]+@' "$dest"; then
		die "unknown placeholder left in $dest: $(grep -oE '@[A-Za-z0-9_.-]+@' "$dest" | head -1)"
	fi
}

# run CMD...: runs CMD in the background and waits for it, so that a SIGTERM or
# SIGINT to this script stops it and the stacks at once (bash runs traps only
# after a foreground command has finished).
run() {
	local rc=0
	"$@" &
	child=$!
	wait "$child" || rc=$?
	child=
	return "$rc"
}

# run_template TEMPLATE: splits the rendered template with shell quoting rules
# (no expansion happens: the rendered values have no quotes or `$`) and runs it.
run_template() {
	local argv
	eval "argv=($(render "$1"))"
	run "${argv[@]}"
}

# start NAME COMMAND: starts a component's command in the background in a new
# process group, its output in $dir/NAME.log.
start() {
	local name=$1 argv
	eval "argv=($(render "$2"))"
	setsid "${argv[@]}" >"$dir/$name.log" 2>&1 </dev/null &
	pids+=($!)
	names+=("$name")
}

# ready NAME KIND ARG TIMEOUT T0: waits until the component started at T0 is ready
# (`tcp`, `http` with "PATH STATUS", `command` with a template), or fails after
# TIMEOUT seconds.
ready() {
	local name=$1 kind=$2 arg=$3 timeout=$4 t0=$5 port=${values[port]} pid=${pids[-1]}
	while true; do
		kill -0 "$pid" 2>/dev/null || {
			cat "$dir/$name.log" >&2
			die "$name exited before it was ready (its log is above)"
		}
		case $kind in
		tcp) (: >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break ;;
		http)
			local code
			code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port${arg% *}" || true)
			[[ $code == "${arg#* }" ]] && break
			;;
		command) run_template "$arg" >/dev/null 2>&1 && break ;;
		esac
		if (($(echo "$(now) - $t0 > $timeout" | bc))); then
			cat "$dir/$name.log" >&2
			die "$name not ready after $timeout s (its log is above)"
		fi
		sleep 0.1
	done
	say "$name ready after $(since "$t0") s (from its start)"
}

# component NAME SRC FILE...: sets the placeholders of component NAME (its own
# port) and writes its files: SRC/FILE rendered into NAME/FILE.
component() {
	local name=$1 src=$2 f
	shift 2
	values[port]=$(free_port)
	values[workdir]=$dir
	values[cpus]=$cpus
	for f in "$@"; do
		write_file "$src/$f" "$name/$f"
	done
}

# endpoint NAME: component NAME is reachable at 127.0.0.1:port (its own
# readiness command may name it, like those of the components after it).
endpoint() {
	values[$1.host]=127.0.0.1
	values[$1.port]=${values[port]}
	values[$1.address]=127.0.0.1:${values[port]}
}

# front_page: fetches the web component's front page, prints its status and size.
front_page() {
	local url=http://127.0.0.1:${values[web.port]}/ out
	out=$(curl -s -o "$dir/front-page.html" -w '%{http_code} %{size_download}' "$url") || die "cannot fetch $url"
	echo "front page $url: status ${out% *}, ${out#* } bytes"
	[[ ${out% *} == 200 ]] || die "the front page did not answer 200"
}

# up NAME PREPARE COMMAND READY_KIND READY_ARG TIMEOUT: starts component NAME as
# isolab does, its files being written: PREPARE (unless empty) must exit 0, then
# COMMAND runs in the background until it is ready.
up() {
	local name=$1 prepare=$2 command=$3 t0
	endpoint "$name"
	if [[ -n $prepare ]]; then
		t0=$(now)
		run_template "$prepare" >"$dir/$name-prepare.log" 2>&1 || {
			cat "$dir/$name-prepare.log" >&2
			die "$name prepare failed (its output is above)"
		}
		say "$name prepared in $(since "$t0") s"
	fi
	t0=$(now)
	start "$name" "$command"
	ready "$name" "$4" "$5" "$6" "$t0"
}

smoke_static() {
	component web "$stacks/static" nginx.conf index.html
	up web "" "nginx -e stderr -c {workdir}/web/nginx.conf -g 'daemon off;'" http "/index.html 200" 10
	front_page
}

smoke_wordpress() {
	local s=$stacks/wordpress t0
	component db "$s/db" my.cnf init.sql
	up db \
		"mariadb-install-db --defaults-file={workdir}/db/my.cnf --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve --extra-file={workdir}/db/init.sql" \
		"mariadbd --defaults-file={workdir}/db/my.cnf" \
		command "mariadb-admin --protocol=tcp --host={db.host} --port={db.port} --user=wordpress --password=password ping" 60

	component web "$s/web" nginx.conf php-fpm.conf prepend.php ready.php run.sh install.php wordpress/wp-config.php mu-plugins/isolab.php
	up web \
		"sh -c 'ln -s /usr/share/wordpress/wp-admin /usr/share/wordpress/wp-includes \"\$1/web/wordpress/\" && php-fpm8.2 --test --fpm-config \"\$1/web/php-fpm.conf\" && nginx -t -q -e stderr -c \"\$1/web/nginx.conf\"' sh {workdir}" \
		"sh {workdir}/web/run.sh" \
		http "/isolab-ready 200" 30

	t0=$(now)
	run_template "php {workdir}/web/install.php {web.address}" >&2 || die "data load failed"
	say "data load done in $(since "$t0") s"

	front_page
	say "SELECT (micro/select.php):"
	run php "$stacks/micro/select.php" "${values[db.host]}" "${values[db.port]}"
	say "INSERT x $inserts (micro/insert.php):"
	run php "$stacks/micro/insert.php" "${values[db.host]}" "${values[db.port]}" "$inserts"
}

(($(id -u) == 0)) || die "run as root (mariadbd, php-fpm and nginx run as root, as isolab runs them)"
(($#)) || set -- static wordpress
for stack in "$@"; do
	case $stack in
	static | wordpress) ;;
	*) die "unknown stack $stack: give static and/or wordpress" ;;
	esac
	dir=$work/$stack
	values=()
	say "== stack $stack in $dir"
	"smoke_$stack"
done
say "== all up; stopping"
