//! `isolab image build|pack`: root filesystems for containers, and packs for engines.

use anyhow::Result;
use isolab_image::{BuildOptions, PackTarget};

use super::Exit;
use crate::cli::{ImageCommand, ImageKind, PackFormat};

pub fn image(command: ImageCommand) -> Result<Exit> {
    match command {
        ImageCommand::Build { kind, dir, force } => {
            let opts = BuildOptions { dir, force };
            let image = match kind {
                ImageKind::Busybox => isolab_image::build_busybox(&opts)?,
                ImageKind::Bench => isolab_image::build_bench(&opts)?,
                ImageKind::BenchDocker => isolab_image::build_bench_docker(&opts)?,
            };
            println!("built {:?} image in {}", image.kind, image.dir.display());
            for s in &image.manifest.sources {
                println!("  {} {}", s.name, s.version);
            }
        }
        ImageCommand::Pack {
            dir,
            to,
            output,
            size,
        } => {
            let target = match to {
                PackFormat::Ext4 => PackTarget::Ext4 { file: output, size },
                PackFormat::Tar => PackTarget::Tar { file: output },
                PackFormat::Oci => PackTarget::Oci { bundle: output },
            };
            let packed = isolab_image::pack(&dir, &target)?;
            println!(
                "{} ({} bytes, sha256 {})",
                packed.path.display(),
                packed.bytes,
                packed.sha256
            );
        }
    }
    Ok(Exit::Success)
}
