//! Google's sitemap extensions of an entry (images, videos, news) and its hreflang alternates, in their validated
//! and normalized form. This is the form that is stored (as JSON, in `urls.ext`), rendered, and given back by the
//! API: every value is already what the renderer writes, so the size counted at write time is the size rendered
//! when the entry is read back.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The extensions of one entry. Empty lists and `None` are left out of its JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Extensions {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub videos: Vec<Video>,
    /// Rendered only in the news sitemap, never in the entry's page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub news: Option<News>,
    /// Sorted by `hreflang`, so that the same set sent in another order is the same entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternates: Vec<Alternate>,
}

impl Extensions {
    pub fn is_empty(&self) -> bool {
        self.images.is_empty() && self.videos.is_empty() && self.news.is_none() && self.alternates.is_empty()
    }

    /// The extension namespaces this entry's `<url>` element uses in a page (news is not rendered there).
    pub fn namespaces(&self) -> Namespaces {
        Namespaces {
            image: !self.images.is_empty(),
            video: !self.videos.is_empty(),
            xhtml: !self.alternates.is_empty(),
        }
    }
}

/// Which extension namespaces an entry's `<url>` element uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Namespaces {
    pub image: bool,
    pub video: bool,
    pub xhtml: bool,
}

impl Namespaces {
    pub fn any(self) -> bool {
        self.image || self.video || self.xhtml
    }
}

/// `<image:image>`: Google reads only its `loc` (caption, title, geo_location and license were dropped in 2022).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Image {
    pub loc: String,
}

/// `<video:video>`, without the fields Google deprecated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Video {
    pub thumbnail_loc: String,
    pub title: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_loc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub player_loc: Option<String>,
    /// Seconds, 1 to 28,800.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u32>,
    /// As rendered (the `lastmod` forms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<f64>, minimum = 0.0, maximum = 5.0)]
    pub rating: Option<Rating>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publication_date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_friendly: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restriction: Option<Restriction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_subscription: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploader: Option<Uploader>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Relationship {
    Allow,
    Deny,
}

impl Relationship {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }
}

/// `<video:restriction relationship="…">DE AT</video:restriction>`: ISO 3166-1 alpha-2 codes, upper case, as given
/// (duplicates removed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Restriction {
    pub relationship: Relationship,
    pub countries: Vec<String>,
}

/// `<video:platform relationship="…">web tv</video:platform>`: `web`, `mobile`, `tv`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    pub relationship: Relationship,
    pub platforms: Vec<String>,
}

/// `<video:uploader info="…">name</video:uploader>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Uploader {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<String>,
}

/// `<news:news>`, rendered in the news sitemap only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct News {
    pub publication: Publication,
    /// As rendered (the `lastmod` forms).
    pub publication_date: String,
    pub title: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Publication {
    pub name: String,
    /// ISO 639 (two or three letters, lower case), or `zh-cn` / `zh-tw`.
    pub language: String,
}

/// `<xhtml:link rel="alternate" hreflang="…" href="…"/>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Alternate {
    /// In BCP 47's canonical case (`de-AT`, `zh-Hant-TW`), or `x-default`.
    pub hreflang: String,
    pub href: String,
}

/// A video rating from 0.0 to 5.0 with at most six decimals, held as millionths so that it round-trips exactly
/// (see [`super::Priority`]). A JSON number in and out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rating(u32);

impl Rating {
    const MAX: u32 = 5_000_000;

    pub fn new(value: f64) -> Result<Self, String> {
        super::entry::millionths(value, Self::MAX).map(Self)
    }

    /// The shortest decimal with the same value, always with a decimal point: `4.5`, `5.0`.
    pub fn render(self) -> String {
        super::entry::render_millionths(self.0)
    }

    pub fn value(self) -> f64 {
        self.render().parse().unwrap_or_default()
    }
}

impl Serialize for Rating {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.value())
    }
}

impl<'de> Deserialize<'de> for Rating {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::new(f64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}
