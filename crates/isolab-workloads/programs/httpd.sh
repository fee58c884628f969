# isolab's `httpd` asset: Apache httpd 2.4 from Debian's source package `apache2`,
# configured as seed 001 did (`./configure --prefix=PREFIX`) against Debian's APR,
# APR-util and PCRE2, built once here to learn which translation units it compiles,
# then cleaned. Run by isolab with `sh -e` in an empty directory; isolab passes the
# host's Debian mirrors as deb-src lines in ISOLAB_DEBIAN_SOURCES.
: "${ISOLAB_DEBIAN_SOURCES:?isolab passes the host Debian mirrors as deb-src lines}"

# The source package of the release itself (not of its -updates or -security suites:
# one tree for the release's life), through a private apt state: the host's lists
# stay untouched.
mkdir -p apt/lists/partial apt/cache/archives/partial apt/sources.list.d
printf '%s\n' "$ISOLAB_DEBIAN_SOURCES" | grep -Ev ' [a-z]+-(security|updates) ' > apt/sources.list
set -- -qq -o APT::Sandbox::User=root -o Debug::NoLocking=true \
  -o Dir::Etc::SourceList="$PWD/apt/sources.list" \
  -o Dir::Etc::SourceParts="$PWD/apt/sources.list.d" \
  -o Dir::State::Lists="$PWD/apt/lists" -o Dir::Cache="$PWD/apt/cache"
apt-get "$@" update
apt-get "$@" source --download-only apache2
version=$(sed -n 's/^Version: //p' apache2_*.dsc)
tar xzf apache2_*.orig.tar.gz
mv httpd-* src
# The manual is not built; the tree is copied into every run's working directory.
rm -rf apt apache2_* src/docs/manual
echo "Apache httpd from Debian's source package apache2 $version" > SOURCE

cd src
# The release tarball carries a stray object (test/modules/http1/mod_h1test/mod_h1test.slo)
# that its build never makes: units are what the build compiles.
find . \( -name '*.lo' -o -name '*.slo' \) -delete
./configure --prefix=/usr/local/apache2 --with-apr=/usr/bin/apr-1-config \
  --with-apr-util=/usr/bin/apu-1-config --with-pcre=/usr/bin/pcre2-config > ../configure.log
make -j"$(nproc)" > ../make.log
# Static (.lo) and shared-module (.slo) objects, sorted by path: a run of less work
# compiles the first ones.
find . -name '*.lo' -o -name '*.slo' | sed 's|^\./||' | LC_ALL=C sort > ../units.list
make clean > /dev/null
test -s ../units.list
# Every unit is compiled again by each run.
test -z "$(find . -name '*.lo' -o -name '*.slo')"
# configure wrote this directory's absolute path into the build files; each run
# rewrites it to where its copy lies.
echo "$PWD" > ../configured-in
grep -rlF "$PWD" . > ../relocate.list
