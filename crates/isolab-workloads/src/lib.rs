//! isolab-workloads (being built).
