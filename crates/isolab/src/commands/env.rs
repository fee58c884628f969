//! `isolab env`: what isolab records about this host (`--check-kvm`: [`super::check_kvm`]).

use anyhow::Result;

use super::Exit;
use crate::cli::EnvArgs;
use crate::host;

pub fn env(args: EnvArgs) -> Result<Exit> {
    if args.check_kvm {
        return super::check_kvm::check_kvm(&args);
    }
    let hierarchy = host::hierarchy().ok();
    let env = host::environment(None, hierarchy.as_ref());
    if args.json {
        let map: serde_json::Map<String, serde_json::Value> = env
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
        println!("{}", super::json::document("environment", &map)?);
    } else {
        let width = env.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in env {
            println!("{k:width$}  {v}");
        }
    }
    Ok(Exit::Success)
}
