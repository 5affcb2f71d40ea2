//! `images`: Google's image extension, `[{"loc": URL}, ...]`, at most [`MAX_IMAGES`]; the fields Google dropped
//! in 2022 refused by name.

use super::super::ext::Image;
use super::JsonTree;
use super::check::{Check, array, join, object, url};

/// Google's limit of `<image:image>` per `<url>`.
pub const MAX_IMAGES: usize = 1_000;

const IMAGE_DROPPED: [(&str, &str); 4] = [
    ("caption", "Google dropped image:caption in 2022; remove it"),
    ("title", "Google dropped image:title in 2022; remove it"),
    ("geo_location", "Google dropped image:geo_location in 2022; remove it"),
    ("license", "Google dropped image:license in 2022; remove it"),
];

pub(super) fn images(c: &mut Check, tree: &JsonTree) -> Vec<Image> {
    let items = array(c, "images", tree, ("images", "{\"loc\": URL} objects"), MAX_IMAGES, "Google's limit per URL");
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("images[{i}]");
        let Some([loc]) = object(c, &path, item, "{\"loc\": URL}", ["loc"], &IMAGE_DROPPED) else { continue };
        if let Some(loc) = loc.required(c, &join(&path, "loc")).and_then(|t| url(c, &join(&path, "loc"), t)) {
            out.push(Image { loc });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{error, ok};
    use super::*;
    use crate::domain::MAX_URL_LEN;

    #[test]
    fn images_are_absolute_normalized_urls_on_any_host() {
        let ext =
            ok(json!({"images": [{"loc": "HTTPS://CDN.Example.NET:443/a|b.jpg"}, {"loc": "http://other.test/x"}]}));
        assert_eq!(
            ext.images,
            [Image { loc: "https://cdn.example.net/a%7Cb.jpg".into() }, Image { loc: "http://other.test/x".into() }]
        );
        error(json!({"images": [{"loc": "/relative.jpg"}]}), "images[0].loc", "not an absolute URL");
        error(json!({"images": [{"loc": "ftp://cdn.example.net/a.jpg"}]}), "images[0].loc", "http or https");
        error(json!({"images": [{"loc": "https://u:p@cdn.example.net/a.jpg"}]}), "images[0].loc", "user information");
        error(json!({"images": [{"loc": "https://cdn.example.net/a.jpg#x"}]}), "images[0].loc", "fragment");
        error(json!({"images": [{}]}), "images[0].loc", "is required");
        error(json!({"images": [{"loc": 3}]}), "images[0].loc", "must be a string, not a number");
        error(json!({"images": ["https://cdn.example.net/a.jpg"]}), "images[0]", "must be an object");
        error(json!({"images": {"loc": "https://cdn.example.net/a.jpg"}}), "images", "must be an array");
    }

    /// An image's URL may be 2,048 characters long, not one more (the limit is "at most", counted once normalized).
    #[test]
    fn an_image_url_of_exactly_2048_characters_is_accepted() {
        let base = "https://cdn.example.net/";
        let longest = format!("{base}{}", "a".repeat(MAX_URL_LEN - base.len()));
        assert_eq!(longest.len(), 2048);
        assert_eq!(ok(json!({"images": [{"loc": longest}]})).images, [Image { loc: longest }]);
        let one_more = format!("{base}{}", "a".repeat(MAX_URL_LEN + 1 - base.len()));
        error(json!({"images": [{"loc": one_more}]}), "images[0].loc", "is 2049 characters long; at most 2048");
        // Counted once normalized: a character that is percent-encoded counts as its encoding.
        let grows = format!("{base}{}|", "a".repeat(MAX_URL_LEN - 1 - base.len()));
        error(json!({"images": [{"loc": grows}]}), "images[0].loc", "is 2050 characters long; at most 2048");
    }

    #[test]
    fn at_most_1000_images() {
        let image = json!({"loc": "https://cdn.example.net/a.jpg"});
        assert_eq!(ok(json!({"images": vec![image.clone(); MAX_IMAGES]})).images.len(), MAX_IMAGES);
        error(json!({"images": vec![image; MAX_IMAGES + 1]}), "images", "has 1001 images");
    }

    #[test]
    fn image_fields_google_dropped_are_refused_saying_so() {
        for key in ["caption", "title", "geo_location", "license"] {
            let fields = json!({"images": [{"loc": "https://cdn.example.net/a.jpg", key: "x"}]});
            error(fields, &format!("images[0].{key}"), &format!("Google dropped image:{key} in 2022; remove it"));
        }
        let fields = json!({"images": [{"loc": "https://cdn.example.net/a.jpg", "colour": "red"}]});
        error(fields, "images[0].colour", "unknown field (allowed: loc)");
    }
}
