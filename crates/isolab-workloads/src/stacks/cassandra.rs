//! The `cassandra` stack: Apache Cassandra 5.0.9 on Debian's OpenJDK 17, one node as
//! component `db`, from the jars of the `cassandra` asset (Maven Central's
//! `org.apache.cassandra:cassandra-all:5.0.9` and its runtime dependencies, resolved
//! once with Debian's Maven and cached by content hash). `run.sh` starts the daemon
//! in the foreground as Apache's scripts would (the Java 17 options of the tarball's
//! `jvm17-server.options`, the heap sized from the shape's memory as
//! `cassandra-env.sh` sizes it), with `cassandra.yaml` and `logback.xml` of this
//! directory; data, commit log, saved caches and hints are in `{workdir}/db`, so the
//! cell's storage applies to them. It is ready when its CQL port accepts connections.
//! The CQL port is the component's; gossip's storage port is the next one.
//!
//! Seed 002 ran Cassandra 2.2 with cassandra-stress: 2.2 needs Java 8, which Debian 12
//! does not ship, and cassandra-stress is only in Apache's tarball; the asset's
//! `stand_in` says so in every experiment's environment and report.

use std::time::Duration;

use crate::stack::Ready;
use crate::AssetDef;

use super::{component, BuiltinStack};

/// The Cassandra release the asset resolves.
pub const CASSANDRA_VERSION: &str = "5.0.9";

/// The stack.
pub(super) fn stack() -> BuiltinStack {
    let mut db = component(
        "db",
        "sh {workdir}/db/run.sh {workdir} {port} {memory_mib}",
        &[
            ("db/run.sh", include_str!("cassandra/run.sh")),
            (
                "db/cassandra.yaml",
                include_str!("cassandra/cassandra.yaml"),
            ),
            ("db/logback.xml", include_str!("cassandra/logback.xml")),
        ],
        Ready::Tcp,
    );
    // A JVM and a fresh node: about a minute on two cpus, more under a small quota.
    db.ready_timeout = Duration::from_secs(300);
    BuiltinStack {
        name: "cassandra",
        description: "Apache Cassandra 5.0.9 (db) on OpenJDK 17, one node, data in the working directory (the `cassandra` asset's jars; seed 002 ran 2.2)",
        components: vec![db],
        data_load: None,
        packages: &["openjdk-17-jre-headless"],
    }
}

/// The jars the stack runs: `cassandra/lib/*.jar` in the working directory.
pub fn asset() -> AssetDef {
    AssetDef {
        name: "cassandra".into(),
        description: format!(
            "Apache Cassandra {CASSANDRA_VERSION}: org.apache.cassandra:cassandra-all and its runtime dependencies from Maven Central"
        ),
        script: "mvn -B -q -Dmaven.repo.local=\"$PWD/.m2\" -f pom.xml \\\n\
                 \x20 org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \\\n\
                 \x20 -DincludeScope=runtime -DoutputDirectory=\"$PWD/lib\"\n\
                 rm -rf .m2 pom.xml\n\
                 ls lib/cassandra-all-*.jar >/dev/null\n"
            .into(),
        sources: vec![crate::FileTemplate {
            path: "pom.xml".into(),
            contents: include_str!("cassandra/pom.xml").into(),
        }],
        tools: vec![
            ("mvn".into(), "maven".into()),
            ("java".into(), "openjdk-17-jre-headless".into()),
        ],
        stand_in: Some(format!(
            "Cassandra {CASSANDRA_VERSION} on OpenJDK 17 driven by latte 0.29.0, in place of seed 002's Cassandra 2.2 driven by cassandra-stress (2.2 needs Java 8, which Debian 12 does not ship; cassandra-stress is only in Apache's tarball)"
        )),
    }
}
