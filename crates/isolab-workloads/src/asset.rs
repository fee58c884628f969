//! Assets: files a workload needs that are built once on the host and reused by
//! every run, such as a compiled MPI program or an input video.
//!
//! An [`AssetDef`] is a build script (run with `sh -e` on the host in an empty
//! directory, with its [`AssetDef::sources`] written there first) and the host
//! programs it runs. The lab keys the result by [`AssetDef::key`]: a hash of the
//! rendered script, the sources and the versions of those programs, so a new
//! ffmpeg or Open MPI builds it again and an unchanged one never does. Before each
//! run the asset's directory is copied to `{workdir}/NAME`.
//!
//! The host builds with the same Debian versions the image carries (the image
//! recipe's packages are the host's versions, `image.host_differs.*` in the
//! environment says otherwise), so a program compiled on the host runs in the
//! image's containers and guests.

use serde::Serialize;

use crate::{render_text, FileTemplate, Params, TemplateError};

/// A file set built once on the host and placed into each run's working directory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AssetDef {
    /// Its directory's name in the working directory (`{workdir}/NAME`).
    pub name: String,
    /// One line saying what it is.
    pub description: String,
    /// The build script, a text template ([`render_text`]: `@work@`, …), run with
    /// `sh -e` in an empty directory whose files become the asset.
    pub script: String,
    /// Files written into that directory before the script runs (a C program).
    pub sources: Vec<FileTemplate>,
    /// Host programs the script runs, with the Debian package of each: their
    /// versions are part of the key.
    pub tools: Vec<(String, String)>,
    /// When the asset stands in for the seed's own input (a generated video for Big
    /// Buck Bunny), what it is; recorded in the environment and shown in the report.
    pub stand_in: Option<String>,
}

impl AssetDef {
    /// The script and sources rendered with `p` (only `@work@` and the other
    /// run-independent values matter: an asset is built once for every run).
    pub fn rendered(&self, p: &Params) -> Result<RenderedAsset, TemplateError> {
        Ok(RenderedAsset {
            script: render_text(&self.script, p)?,
            sources: self
                .sources
                .iter()
                .map(|f| Ok((f.path.clone(), render_text(&f.contents, p)?)))
                .collect::<Result<_, TemplateError>>()?,
        })
    }
}

/// An asset's script and sources for one amount of work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedAsset {
    /// The build script.
    pub script: String,
    /// Relative path and contents of each source file.
    pub sources: Vec<(String, String)>,
}

impl RenderedAsset {
    /// The text that keys the cache, with `versions` (program → version) of the
    /// script's tools: every input of the build, each on its own line.
    pub fn key_text(&self, name: &str, versions: &[(String, String)]) -> String {
        let mut text = format!("asset {name}\nscript {:?}\n", self.script);
        for (path, contents) in &self.sources {
            text.push_str(&format!("source {path:?} {contents:?}\n"));
        }
        for (tool, version) in versions {
            text.push_str(&format!("tool {tool} {version}\n"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asset() -> AssetDef {
        AssetDef {
            name: "prog".into(),
            description: "a program".into(),
            script: "cc -o prog prog.c -DN=@work@\n".into(),
            sources: vec![FileTemplate {
                path: "prog.c".into(),
                contents: "int main(void) { return N - @work@; }\n".into(),
            }],
            tools: vec![("cc".into(), "gcc".into())],
            stand_in: None,
        }
    }

    #[test]
    fn the_work_is_rendered_into_script_and_sources() {
        let mut p = Params::sample([]);
        p.work = 7;
        let r = asset().rendered(&p).unwrap();
        assert_eq!(r.script, "cc -o prog prog.c -DN=7\n");
        assert_eq!(r.sources[0].1, "int main(void) { return N - 7; }\n");
    }

    #[test]
    fn the_key_text_changes_with_work_source_and_tool_version() {
        let mut p = Params::sample([]);
        p.work = 7;
        let a = asset();
        let v1 = [("cc".to_owned(), "12.2.0-14".to_owned())];
        let v2 = [("cc".to_owned(), "12.2.0-15".to_owned())];
        let base = a.rendered(&p).unwrap().key_text("prog", &v1);
        assert_ne!(base, a.rendered(&p).unwrap().key_text("prog", &v2));
        p.work = 8;
        assert_ne!(base, a.rendered(&p).unwrap().key_text("prog", &v1));
        p.work = 7;
        let mut b = asset();
        b.sources[0].contents.push_str("/* changed */\n");
        assert_ne!(base, b.rendered(&p).unwrap().key_text("prog", &v1));
        assert_eq!(base, a.rendered(&p).unwrap().key_text("prog", &v1));
    }
}
