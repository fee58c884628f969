//! The built-in service stacks: components and data loads that a spec reuses by
//! name (`stack = "wordpress"` in a `[workload.NAME]` table) with a load or a
//! measured client of its own.
//!
//! | stack | components | what it serves |
//! |---|---|---|
//! | `static` | `web`: nginx | a fixed 10 000-byte page at `/index.html` (fast tests, generator headroom) |
//! | `wordpress` | `db`: MariaDB, `web`: php-fpm + nginx | a deterministic WordPress site whose front page is about 10 kB (seed 003) |
//! | `postgresql` | `db`: PostgreSQL 15 | an empty cluster sized from the cell (`postgresql.rs`); the OLTP workloads load their data |
//! | `mariadb` | `db`: MariaDB 10.11 | database `bench`, sized from the cell (`mariadb.rs`) |
//! | `redis` | `db`: Redis 7.0 | an empty store, data directory in the working directory (`redis.rs`) |
//! | `cassandra` | `db`: Cassandra 5.0.9 on OpenJDK 17 | one node, data in the working directory; needs the `cassandra` asset's jars (`cassandra.rs`) |
//!
//! The files of each stack are in this directory, next to this module, and are
//! compiled in.

pub mod cassandra;
mod mariadb;
mod postgresql;
mod redis;

use std::time::Duration;

use crate::stack::{ComponentDef, FileTemplate, Ready};

/// A built-in stack: what a spec's `stack = "NAME"` takes.
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltinStack {
    /// Its name, e.g. `wordpress`.
    pub name: &'static str,
    /// One line saying what it serves.
    pub description: &'static str,
    /// Its components, in start order.
    pub components: Vec<ComponentDef>,
    /// Its unmeasured data load, run once every component is ready.
    pub data_load: Option<String>,
    /// The Debian packages its components need in the image (and on the host for
    /// the `host` platform).
    pub packages: &'static [&'static str],
}

/// Every built-in stack.
pub fn stacks() -> Vec<BuiltinStack> {
    vec![
        static_page(),
        wordpress(),
        postgresql::stack(),
        mariadb::stack(),
        redis::stack(),
        cassandra::stack(),
    ]
}

/// nginx serving a fixed 10 000-byte page.
fn static_page() -> BuiltinStack {
    BuiltinStack {
        name: "static",
        description: "nginx serving a fixed 10 000-byte page at /index.html",
        components: vec![component(
            "web",
            "nginx -e stderr -c {workdir}/web/nginx.conf -g 'daemon off;'",
            &[
                ("web/nginx.conf", include_str!("static/nginx.conf")),
                ("web/index.html", include_str!("static/index.html")),
            ],
            Ready::Http {
                path: "/index.html".into(),
                status: 200,
            },
        )],
        data_load: None,
        packages: &["nginx-light"],
    }
}

/// Seed 003's WordPress + MySQL stack from Debian's packages (see `wordpress/README.md`):
/// `db` is MariaDB, `web` php-fpm and nginx under one shell; the data load installs a
/// deterministic site whose front page is 10 066 bytes. The web component also writes
/// seed 003's SQL micro-operation scripts, `micro/select.php` and `micro/insert.php`,
/// for measured clients (`php {workdir}/micro/select.php {db.host} {db.port}`).
fn wordpress() -> BuiltinStack {
    let mut db = component(
        "db",
        "mariadbd --defaults-file={workdir}/db/my.cnf",
        &[
            ("db/my.cnf", include_str!("wordpress/db/my.cnf")),
            ("db/init.sql", include_str!("wordpress/db/init.sql")),
        ],
        Ready::Command(
            "mariadb-admin --protocol=tcp --host={db.host} --port={db.port} --user=wordpress --password=password ping".into(),
        ),
    );
    db.prepare = Some(
        "mariadb-install-db --defaults-file={workdir}/db/my.cnf --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve --extra-file={workdir}/db/init.sql".into(),
    );
    let mut web = component(
        "web",
        "sh {workdir}/web/run.sh",
        &[
            ("web/run.sh", include_str!("wordpress/web/run.sh")),
            ("web/nginx.conf", include_str!("wordpress/web/nginx.conf")),
            (
                "web/php-fpm.conf",
                include_str!("wordpress/web/php-fpm.conf"),
            ),
            ("web/prepend.php", include_str!("wordpress/web/prepend.php")),
            ("web/ready.php", include_str!("wordpress/web/ready.php")),
            (
                "web/wordpress/wp-config.php",
                include_str!("wordpress/web/wordpress/wp-config.php"),
            ),
            (
                "web/mu-plugins/isolab.php",
                include_str!("wordpress/web/mu-plugins/isolab.php"),
            ),
            ("web/install.php", include_str!("wordpress/web/install.php")),
            ("micro/select.php", include_str!("micro/select.php")),
            ("micro/insert.php", include_str!("micro/insert.php")),
        ],
        Ready::Http {
            path: "/isolab-ready".into(),
            status: 200,
        },
    );
    web.prepare = Some(
        "sh -c 'ln -s /usr/share/wordpress/wp-admin /usr/share/wordpress/wp-includes \"$1/web/wordpress/\" && php-fpm8.2 --test --fpm-config \"$1/web/php-fpm.conf\" && nginx -t -q -e stderr -c \"$1/web/nginx.conf\"' sh {workdir}".into(),
    );
    web.ready_timeout = Duration::from_secs(60);
    BuiltinStack {
        name: "wordpress",
        description: "seed 003's stack: MariaDB (db), php-fpm + nginx with WordPress (web), a deterministic site whose front page is 10 066 bytes",
        components: vec![db, web],
        data_load: Some("php {workdir}/web/install.php {web.address}".into()),
        packages: &[
            "mariadb-server",
            "mariadb-client",
            "nginx-light",
            "php8.2-fpm",
            "php8.2-mysql",
            "php8.2-cli",
            "wordpress",
            "wordpress-theme-twentytwentyone",
        ],
    }
}

/// The assets the built-in stack `name` runs from (Cassandra's jars), which a
/// workload taking its components takes too.
pub fn assets(name: &str) -> Vec<crate::AssetDef> {
    match name {
        "cassandra" => vec![cassandra::asset()],
        _ => Vec::new(),
    }
}

/// The built-in stack named `name`.
pub fn stack(name: &str) -> Option<BuiltinStack> {
    stacks().into_iter().find(|s| s.name == name)
}

fn component(name: &str, command: &str, files: &[(&str, &str)], ready: Ready) -> ComponentDef {
    ComponentDef {
        name: name.into(),
        command: command.into(),
        prepare: None,
        files: files
            .iter()
            .map(|(path, contents)| FileTemplate {
                path: (*path).into(),
                contents: (*contents).into(),
            })
            .collect(),
        ready,
        ready_timeout: Duration::from_secs(60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{Measure, ShapeScope, StackDef};

    #[test]
    fn every_builtin_stack_is_a_valid_stack() {
        for b in stacks() {
            let stack = StackDef {
                components: b.components.clone(),
                shape: ShapeScope::Component,
                data_load: b.data_load.clone(),
                data_paths: Vec::new(),
                keep_data: false,
                measure: Measure::Command,
            };
            stack
                .validate()
                .unwrap_or_else(|e| panic!("{}: {e}", b.name));
            let first = &stack.components[0].name;
            assert!(first == "web" || first == "db", "{}: {first}", b.name);
        }
        let page = stack("static").unwrap();
        let html = &page.components[0].files[1];
        assert_eq!(
            (html.path.as_str(), html.contents.len()),
            ("web/index.html", 10_000)
        );
    }
}
