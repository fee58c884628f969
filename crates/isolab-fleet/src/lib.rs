//! isolab's fleets: one experiment spec run by many hosts, dispatched by Slurm.
//!
//! isolab never schedules work across machines itself. A fleet is submitted as one Slurm
//! job of N exclusive nodes whose one task per node runs `isolab fleet task FLEET` there
//! ([`batch_script`]); each host runs every cell in its own shuffled rounds, seeded by
//! [`host_seed`] from the fleet's seed and its name, into the shared PostgreSQL store.
//! [`Slurm`] submits (`sbatch --parsable`), reports (`scontrol show job --oneliner`) and
//! cancels (`scancel`) through a [`isolab_tools::ToolRunner`], so its tests check the
//! command lines against a fake and its parsers against output captured from Slurm.
//!
//! This crate depends on no isolab crate but `isolab-tools`.

mod seed;
mod slurm;
#[cfg(feature = "testing")]
pub mod testing;

pub use seed::host_seed;
pub use slurm::{
    batch_script, parse_job, JobInfo, MissingField, Nodes, Slurm, SlurmError, SlurmRequest,
};
