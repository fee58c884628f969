//! isolab-cgroups (being built).
