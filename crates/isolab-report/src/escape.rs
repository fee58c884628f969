//! HTML escaping, below every module that writes HTML (the report's sections, its page
//! and [`crate::table::Table::render_html`]).

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
