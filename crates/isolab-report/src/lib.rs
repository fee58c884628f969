//! isolab-report (being built).
