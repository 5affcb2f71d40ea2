//! What the API, the view and the metrics say of a site's crawlers (being written).
