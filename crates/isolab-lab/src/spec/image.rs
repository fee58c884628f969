//! The experiment's image. `[experiment] image = "DIR"` names a directory that is used as it
//! is; `image = "docker-archive:FILE"` (or another of skopeo's transports: `oci:`,
//! `oci-archive:`, `docker-daemon:`, `containers-storage:`) names a container image of
//! one's own, imported by `isolab run` and used as it is on every container platform and
//! as the root of `vm` and `vm+isolab` guests. Without it the image is a recipe ([`isolab_image::Recipe`]): the bench packages, the
//! packages of the matrix's workloads (`[workload.NAME] packages`, the built-ins' own), those
//! of `[image] packages`, and `docker.io` when a `vm+docker` platform runs Docker in its guest.
//! Its directory is `recipe-<hash>` under [`isolab_image::DEFAULT_CACHE_ROOT`], built by
//! `isolab run` (or `isolab image ensure`) before the first run when it is not there yet.

use std::path::{Path, PathBuf};

use isolab_image::Recipe;
use toml::Spanned;

use super::raw::RawImage;
use super::validator::Validator;
use super::Cell;

/// The engine whose guest runs Docker, so whose image needs Docker's packages.
const VM_DOCKER: &str = "vm+docker";

impl Validator<'_> {
    /// The names of a `packages = [...]` list (`what` says whose, for errors), each checked as
    /// a Debian package name; a bad one is an error at its position.
    pub(super) fn packages(&mut self, what: &str, raw: Vec<Spanned<String>>) -> Vec<String> {
        let mut out = Vec::new();
        for p in raw {
            match isolab_image::check_package_name(p.get_ref()) {
                Ok(()) => out.push(p.into_inner()),
                Err(e) => self.err(p.span(), format!("{what}: {e}")),
            }
        }
        out
    }

    /// `[image] packages`, when the image is a recipe (`Some`, possibly empty); `None` when
    /// `[experiment] image` names a directory (then `[image]` is an error: it would be ignored).
    pub(super) fn image_packages(
        &mut self,
        directory_given: bool,
        raw: Option<Spanned<RawImage>>,
    ) -> Option<Vec<String>> {
        let Some(raw) = raw else {
            return (!directory_given).then(Vec::new);
        };
        if directory_given {
            self.err(
                raw.span(),
                "[image] adds packages to the recipe image, but [experiment] image names a directory, which is used as it is: remove one of them",
            );
            return None;
        }
        Some(self.packages("image.packages", raw.into_inner().packages))
    }
}

/// Why an image of one's own cannot run on `cells`' platforms, when it cannot: `vm+docker`
/// runs Docker in a guest of the bench-docker recipe.
pub(super) fn own_image_refused(cells: &[Cell]) -> Option<String> {
    cells
        .iter()
        .any(|c| c.platform.kind.as_str() == VM_DOCKER)
        .then(|| format!("[experiment] image names a container image of one's own, which runs on every container platform and as the guest root of vm and vm+isolab, but not on {VM_DOCKER}, whose guest runs Docker from the bench-docker recipe: exclude {VM_DOCKER} or use the default image"))
}

/// Why `{entrypoint}` (an image of one's own's command) cannot be rendered for `cells`,
/// when it cannot: the image is not one of one's own, or a cell runs on the host.
pub(super) fn entrypoint_refused(cells: &[Cell], own_image: bool) -> Option<String> {
    let uses = |c: &&Cell| {
        let w = &c.workload;
        [
            Some(&w.command),
            w.prepare.as_ref(),
            w.cleanup.as_ref(),
            w.server.as_ref(),
        ]
        .into_iter()
        .flatten()
        .any(|t| t.contains("{entrypoint}"))
    };
    let cell = cells.iter().find(uses)?;
    if !own_image {
        return Some(format!(
            "workload {} uses {{entrypoint}}, the command of an image of one's own, but [experiment] image names none: set image = \"docker-archive:FILE\" (or oci:, oci-archive:, docker-daemon:, containers-storage:)",
            cell.workload.name
        ));
    }
    let on_host = cells
        .iter()
        .filter(uses)
        .find(|c| !c.platform.kind.needs_image())?;
    Some(format!(
        "workload {} uses {{entrypoint}}, the image's own command, but platform {} runs no image: exclude it for this workload",
        on_host.workload.name, on_host.platform.name
    ))
}

/// The recipe of the experiment's image: the bench recipe plus the packages of the workloads
/// in `cells` and `extra` (checked names), plus Docker's for `vm+docker` cells.
pub(super) fn recipe(cells: &[Cell], extra: &[String]) -> Recipe {
    let mut packages: Vec<&str> = cells
        .iter()
        .flat_map(|c| c.workload.packages.iter().map(String::as_str))
        .chain(extra.iter().map(String::as_str))
        .collect();
    let base = if cells.iter().any(|c| c.platform.kind.as_str() == VM_DOCKER) {
        Recipe::bench_docker()
    } else {
        Recipe::bench()
    };
    packages.sort_unstable();
    packages.dedup();
    // Every name was checked when the spec was read.
    base.clone().with(packages).unwrap_or(base)
}

/// Where the image of `recipe` lives: its directory under [`isolab_image::DEFAULT_CACHE_ROOT`].
pub(super) fn recipe_dir(recipe: &Recipe) -> PathBuf {
    recipe.dir_in(Path::new(isolab_image::DEFAULT_CACHE_ROOT))
}

/// The root images of the `guest` levels of `cells`: `recipe`'s packages from each level's
/// suite, set as each cell's guest image; the recipes to build, one per suite. A guest
/// level needs the experiment's image to come from a recipe.
pub(super) fn guest_images(
    cells: &mut [Cell],
    recipe: Option<&Recipe>,
) -> Result<Vec<Recipe>, String> {
    let mut recipes: Vec<Recipe> = Vec::new();
    for cell in cells.iter_mut() {
        let Some(guest) = cell.platform.guest.as_mut() else {
            continue;
        };
        let Some(recipe) = recipe else {
            return Err(format!(
                "matrix.guest `{}` builds each guest's root image from the experiment's recipe (the workloads' packages from the level's Debian suite), so [experiment] cannot name an image directory or an image of one's own: remove `image`, and list extra packages under [image] packages",
                guest.os
            ));
        };
        let suite = guest.os.image_suite();
        let own = match recipes.iter().find(|r| r.suite() == suite) {
            Some(r) => r.clone(),
            None => {
                let r = Recipe::new(suite, recipe.packages().iter()).map_err(|e| e.to_string())?;
                recipes.push(r.clone());
                r
            }
        };
        guest.image = recipe_dir(&own);
    }
    Ok(recipes)
}

#[cfg(test)]
mod tests {
    use crate::spec::tests::{errors, parse};
    use isolab_image::Recipe;

    const WORKLOAD: &str = "[workload.web]\ncommand = \"nginx -t\"\nparser = \"time\"\npackages = [\"nginx\", \"curl\"]\n";

    #[test]
    fn the_recipe_is_the_bench_base_plus_workloads_and_image_packages() {
        let spec = parse(&format!(
            "[experiment]\nname = \"x\"\n[image]\npackages = [\"jq\"]\n[matrix]\nplatform = [\"host\", \"isolab\"]\nworkload = [\"web\", \"fio-randread\"]\n{WORKLOAD}"
        ))
        .unwrap();
        let want = Recipe::bench().with(["nginx", "curl", "jq"]).unwrap();
        assert_eq!(spec.recipe.as_ref(), Some(&want));
        assert_eq!(
            spec.image,
            want.dir_in(std::path::Path::new(isolab_image::DEFAULT_CACHE_ROOT))
        );
        let web = spec
            .cells
            .iter()
            .find(|c| c.workload.name == "web")
            .unwrap();
        assert_eq!(web.workload.packages, ["nginx", "curl"]);
        // A workload table that is not in the matrix adds nothing.
        let spec = parse(&format!(
            "[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n{WORKLOAD}"
        ))
        .unwrap();
        assert_eq!(spec.recipe, Some(Recipe::bench()));
    }

    #[test]
    fn a_built_in_stack_brings_its_packages() {
        let spec = parse("[experiment]\nname = \"x\"\n[platform.iso-host]\nengine = \"isolab\"\nnetwork = \"host\"\n[matrix]\nplatform = [\"host\", \"iso-host\"]\nworkload = [\"page\"]\n[workload.page]\nstack = \"static\"\npackages = [\"curl\"]\n[workload.page.load]\ngenerator = \"wrk\"\ntarget = \"web\"\nrequests = [{ name = \"page\", path = \"/index.html\" }]\nprofile = { users = 2, duration = \"5s\" }\n").unwrap();
        assert_eq!(
            spec.cells[0].workload.packages,
            ["nginx-light", "curl"],
            "the stack's, then the table's"
        );
        assert_eq!(
            spec.recipe,
            Some(Recipe::bench().with(["nginx-light", "curl"]).unwrap())
        );
    }

    #[test]
    fn vm_docker_adds_docker_and_a_directory_is_used_as_is() {
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"host\", \"vm(tcg)+docker\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert_eq!(spec.recipe, Some(Recipe::bench_docker()));
        let spec = parse(&format!(
            "[experiment]\nname = \"x\"\nimage = \"/images/mine\"\n[matrix]\nworkload = [\"web\"]\n{WORKLOAD}"
        ))
        .unwrap();
        assert_eq!(spec.recipe, None);
        assert_eq!(spec.image, std::path::PathBuf::from("/images/mine"));
    }

    #[test]
    fn an_image_of_ones_own_is_a_reference_relative_to_the_spec_and_has_no_recipe() {
        let spec = parse_at(
            "/specs/app.toml",
            "[experiment]\nname = \"x\"\nimage = \"docker-archive:images/app.tar\"\n[matrix]\nplatform = [\"host\", \"docker\", \"vm(tcg)\"]\nworkload = [\"sysbench-cpu\"]\n",
        )
        .unwrap();
        assert_eq!(spec.recipe, None);
        let r = spec.image_ref.as_ref().unwrap();
        assert_eq!(r.transport, isolab_image::Transport::DockerArchive);
        assert_eq!(r.to_string(), "docker-archive:/specs/images/app.tar");
        let spec = parse("[experiment]\nname = \"x\"\nimage = \"docker-daemon:app:1.0\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert_eq!(spec.image_ref.unwrap().to_string(), "docker-daemon:app:1.0");
        let spec = parse("[experiment]\nname = \"x\"\nimage = \"oci:/l:v2\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert_eq!(spec.image_ref.unwrap().name, "/l:v2");
    }

    #[test]
    fn an_image_of_ones_own_is_refused_on_vm_docker_and_an_empty_reference_is_located() {
        let errs = errors("[experiment]\nname = \"x\"\nimage = \"oci-archive:/a.tar\"\n[matrix]\nplatform = [\"host\", \"vm(tcg)+docker\"]\nworkload = [\"sysbench-cpu\"]\n");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("not on vm+docker"), "{errs:?}");
        let errs = errors("[experiment]\nname = \"x\"\nimage = \"docker-archive:\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert!(
            errs[0].starts_with("exp.toml:3:9: image reference `docker-archive:`"),
            "{errs:?}"
        );
    }

    #[test]
    fn the_image_command_needs_an_image_of_ones_own_and_no_host_cell() {
        let w = "[workload.app]\ncommand = \"{entrypoint} --threads={cpus}\"\nparser = \"sysbench\"\nprimary = \"events_per_second\"\n";
        let errs = errors(&format!("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"isolab\"]\nworkload = [\"app\"]\n{w}"));
        assert!(
            errs[0].contains("workload app uses {entrypoint}") && errs[0].contains("names none"),
            "{errs:?}"
        );
        let errs = errors(&format!("[experiment]\nname = \"x\"\nimage = \"oci:/l\"\n[matrix]\nplatform = [\"host\", \"isolab\"]\nworkload = [\"app\"]\n{w}"));
        assert!(errs[0].contains("platform host runs no image"), "{errs:?}");
        let spec = parse(&format!("[experiment]\nname = \"x\"\nimage = \"oci:/l\"\n[matrix]\nplatform = [\"isolab\", \"docker\"]\nworkload = [\"app\"]\n{w}")).unwrap();
        assert_eq!(spec.cells.len(), 2);
    }

    /// Parses a spec read from `path`.
    fn parse_at(
        path: &str,
        text: &str,
    ) -> Result<crate::spec::ExperimentSpec, crate::spec::SpecErrors> {
        crate::spec::ExperimentSpec::parse(
            crate::spec::Source::new(path, text),
            &crate::spec::tests::host("0-1"),
        )
    }

    #[test]
    fn bad_packages_are_located() {
        let errs = errors("[experiment]\nname = \"x\"\n[image]\npackages = [\"jq\", \"Bad Name\"]\n[matrix]\nworkload = [\"w\"]\n[workload.w]\ncommand = \"true\"\nparser = \"time\"\npackages = [\"ok\", \"x,y\"]\n");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs[0].starts_with(
                "exp.toml:4:19: image.packages: `Bad Name` is not a Debian package name"
            ),
            "{errs:?}"
        );
        assert!(
            errs[1].starts_with(
                "exp.toml:10:19: workload.w.packages: `x,y` is not a Debian package name"
            ),
            "{errs:?}"
        );
        let errs = errors("[experiment]\nname = \"x\"\n[image]\npackages = \"jq\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert!(
            errs[0].starts_with("exp.toml:4:12: invalid type: string \"jq\", expected a sequence"),
            "{errs:?}"
        );
        let errs = errors("[experiment]\nname = \"x\"\nimage = \"/i\"\n[image]\npackages = [\"jq\"]\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert!(
            errs[0].starts_with("exp.toml:4:1: [image] adds packages to the recipe image, but [experiment] image names a directory"),
            "{errs:?}"
        );
    }
}
