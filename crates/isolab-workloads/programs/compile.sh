# isolab's `compile`: the configured Apache httpd tree of the `httpd` asset, moved to
# this run's working directory (not timed), then built with `make -j@threads@`
# (timed): the whole build when @work@ covers every translation unit, else the first
# @work@ units of units.list, one sub-make per directory under one job server.
# Prints the execution time and the units compiled as isolab's JSON metrics.
set -e
top=@workdir@/httpd
cd "$top/src"
old=$(cat "$top/configured-in")
if [ "$old" != "$PWD" ]; then
  xargs sed -i "s|$old|$PWD|g" < "$top/relocate.list"
fi
total=$(wc -l < "$top/units.list")
set --
if [ @work@ -lt "$total" ]; then
  head -n @work@ "$top/units.list" | awk '
    {
      if (index($0, "/") == 0) { d = "."; f = $0 }
      else { d = $0; sub(/\/[^\/]*$/, "", d); f = substr($0, length(d) + 2) }
      if (!(d in seen)) { seen[d] = ++n; dir[n] = d }
      files[seen[d]] = files[seen[d]] " " f
    }
    END {
      printf "all:"
      for (i = 1; i <= n; i++) printf " d%d", i
      printf "\n"
      for (i = 1; i <= n; i++) printf "d%d:\n\t$(MAKE) -C %s%s\n", i, dir[i], files[i]
    }' > "$top/units.mk"
  set -- -f "$top/units.mk"
fi
start=$(date +%s%N)
if ! make -j@threads@ "$@" > "$top/make.log" 2>&1; then
  echo "compile: make -j@threads@ failed in $PWD (its whole output: httpd/make.log in the working directory); the compiler's first errors:" >&2
  grep -m 10 ': error:' "$top/make.log" >&2 || tail -n 20 "$top/make.log" >&2
  exit 1
fi
end=$(date +%s%N)
units=$(find . -name '*.lo' -o -name '*.slo' | wc -l)
seconds=$(echo "$start $end" | awk '{printf "%.6f", ($2 - $1) / 1e9}')
printf '{"metrics": [{"name": "execution_time", "unit": "s", "direction": "lower", "value": %s}, {"name": "units", "unit": "count", "direction": "higher", "value": %d}]}\n' "$seconds" "$units"
