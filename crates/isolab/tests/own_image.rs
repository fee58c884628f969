//! An image of one's own, for real (root): a two-layer image with an environment and an
//! entrypoint, made with umoci from Debian's busybox and copied into a Docker archive with
//! skopeo (no Docker daemon needed to make it), runs on isolab, crun, Docker and Podman
//! from `docker-archive:` and on isolab and crun from `oci:`, with its environment and
//! its second layer on every platform, `{entrypoint}` running its own command, and the
//! same digest recorded on each.

use std::path::Path;
use std::process::{Command, Output};

fn isolab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_isolab"))
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("the program runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// A two-layer OCI image in `layout` (tag `app`): busybox, then /etc/app-release; env
/// APP_MODE=bench, entrypoint `sh -c 'test "$APP_MODE" = bench'`.
fn make_image(dir: &Path, layout: &Path) {
    let root = dir.join("busybox");
    ok(isolab().args(["image", "build", "busybox"]).arg(&root));
    let extra = dir.join("extra");
    std::fs::create_dir_all(extra.join("etc")).unwrap();
    std::fs::write(extra.join("etc/app-release"), "app 1.0\n").unwrap();
    let image = format!("{}:app", layout.display());
    ok(Command::new("umoci").args(["init", "--layout"]).arg(layout));
    ok(Command::new("umoci").args(["new", "--image", &image]));
    ok(Command::new("umoci")
        .args(["insert", "--image", &image])
        .arg(&root)
        .arg("/"));
    ok(Command::new("umoci")
        .args(["insert", "--image", &image])
        .arg(&extra)
        .arg("/"));
    ok(Command::new("umoci").args([
        "config",
        "--image",
        &image,
        "--config.env",
        "APP_MODE=bench",
        "--config.entrypoint",
        "sh",
        "--config.cmd",
        "-c",
        "--config.cmd",
        "test \"$APP_MODE\" = bench",
    ]));
}

/// The experiment's environment entries ending in `image_digest`, and `image.digest`.
fn digests(db: &Path) -> Vec<(String, String)> {
    let store = isolab_store::Store::open(db).unwrap();
    let id = store.resolve("own").unwrap();
    store
        .environment(id)
        .unwrap()
        .into_iter()
        .filter(|(k, _)| k.ends_with("image_digest") || k == "image.digest")
        .collect()
}

fn run_own(dir: &Path, image: &str, platforms: &str) -> Vec<(String, String)> {
    let spec = dir.join(format!("own-{}.toml", platforms.len()));
    std::fs::write(
        &spec,
        format!(
            "[experiment]\nname = \"own\"\nimage = \"{image}\"\nrepetitions = {{ warmup = 0, min = 2, max = 2 }}\n\n[matrix]\nplatform = [{platforms}]\nworkload = [\"own-command\", \"env-check\"]\n\n[workload.own-command]\ncommand = \"{{entrypoint}}\"\nparser = \"time\"\n\n[workload.env-check]\ncommand = \"sh -c 'test \\\"$APP_MODE\\\" = bench && test -f /etc/app-release'\"\nparser = \"time\"\n"
        ),
    )
    .unwrap();
    let db = dir.join(format!("own-{}.db", platforms.len()));
    let out = isolab()
        .arg("--db")
        .arg(&db)
        .args(["run", "--no-report", "--workdir"])
        .arg(dir.join("work"))
        .arg(&spec)
        .output()
        .unwrap();
    // A failed run says why: its stored error, beside the run's output.
    let why = || {
        let store = isolab_store::Store::open(&db).unwrap();
        let id = store.resolve("own").unwrap();
        let errors: Vec<String> = store
            .runs(id)
            .unwrap()
            .iter()
            .filter_map(|r| r.error.as_ref().map(|e| format!("run {}: {e}", r.id)))
            .collect();
        format!(
            "{}\n{}\nstored errors:\n{}",
            text(&out.stdout),
            text(&out.stderr),
            errors.join("\n")
        )
    };
    assert!(out.status.success(), "{}", why());
    // Every cell has its two runs.
    let store = isolab_store::Store::open(&db).unwrap();
    let id = store.resolve("own").unwrap();
    let runs = store.runs(id).unwrap();
    assert!(
        runs.iter().all(|r| r.status == isolab_store::RunStatus::Ok),
        "{}",
        why()
    );
    assert_eq!(
        runs.len(),
        2 * 2 * platforms.split(',').count(),
        "{}",
        text(&out.stdout)
    );
    digests(&db)
}

#[test]
fn an_image_of_ones_own_runs_on_every_container_platform_with_one_digest() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        isolab_skip::skip("containers and cgroups need root");
        return;
    }
    let missing: Vec<&str> = ["umoci", "skopeo", "docker", "podman", "crun"]
        .into_iter()
        .filter(|p| isolab_tools::find_program(p).is_none())
        .collect();
    if !missing.is_empty() {
        isolab_skip::skip(format!(
            "{missing:?} not installed (`scripts/setup.sh engines` installs them)"
        ));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    make_image(dir.path(), &layout);
    let archive = dir.path().join("app.tar");
    ok(Command::new("skopeo")
        .args(["copy", "--quiet", &format!("oci:{}:app", layout.display())])
        .arg(format!("docker-archive:{}:app:1", archive.display())));

    let from_docker = run_own(
        dir.path(),
        &format!("docker-archive:{}", archive.display()),
        "\"isolab\", \"crun\", \"docker\", \"podman\"",
    );
    let image = from_docker
        .iter()
        .find(|(k, _)| k == "image.digest")
        .map(|(_, v)| v.clone())
        .expect("image.digest");
    // The archive's configuration digest is the image's ID, on every platform.
    let config = ok(Command::new("skopeo").args([
        "inspect",
        "--raw",
        "--config",
        &format!("docker-archive:{}", archive.display()),
    ]));
    let id = format!(
        "sha256:{}",
        isolab_image::sha256_file(&{
            let f = dir.path().join("config.json");
            std::fs::write(&f, &config.stdout).unwrap();
            f
        })
        .unwrap()
    );
    assert_eq!(image, id);
    for platform in ["isolab", "crun", "docker", "podman"] {
        let key = format!("engine.{platform}.image_digest");
        let got = from_docker.iter().find(|(k, _)| *k == key);
        assert_eq!(
            got.map(|(_, v)| v.as_str()),
            Some(id.as_str()),
            "{from_docker:?}"
        );
    }

    // An OCI layout: isolab and crun run its root file system under the same digest.
    let from_oci = run_own(
        dir.path(),
        &format!("oci:{}:app", layout.display()),
        "\"isolab\", \"crun\"",
    );
    let oci = from_oci
        .iter()
        .find(|(k, _)| k == "image.digest")
        .map(|(_, v)| v.clone())
        .unwrap();
    for platform in ["isolab", "crun"] {
        let key = format!("engine.{platform}.image_digest");
        assert_eq!(
            from_oci.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            Some(&oci),
            "{from_oci:?}"
        );
    }
}
