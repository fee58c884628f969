//! isolab-store (being built).
