<?php
// isolab service stack `wordpress`, component `web`: a must-use plugin.
// The site's address is fixed (http://wordpress.test, see wp-config.php) while
// the load generator reaches the server at the platform's address and port:
// do not redirect it to the canonical address.
remove_action('template_redirect', 'redirect_canonical');

// The front page's size: seed 003's WordPress front page was about 10 000
// bytes. WordPress 5.9 and later add to every page of a classic theme the
// block editor's global styles (an inline stylesheet of 10.8 kB) and its
// duotone SVG filters (6 kB), and Twenty Twenty-One asks for the block
// library's opinionated styles (2.8 kB inline), none of which the posts of
// this site use; without them its front page is as large as the seed's.
remove_action('wp_enqueue_scripts', 'wp_enqueue_global_styles');
remove_action('wp_footer', 'wp_enqueue_global_styles', 1);
remove_action('wp_body_open', 'wp_global_styles_render_svg_filters');
add_action('after_setup_theme', function () {
    remove_theme_support('wp-block-styles');
}, 11);
