//! isolab-lab (being built).
