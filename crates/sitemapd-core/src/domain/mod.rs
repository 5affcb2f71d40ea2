//! The values a URL record is made of. Each type's `parse` is its validation: a value that exists is valid and
//! already in the normalized form that is stored and rendered.

mod entry;
pub mod ext;
pub mod ext_input;
mod lastmod;
mod loc;
mod section;
pub mod site;

pub use entry::{ChangeFreq, Entry, EntryInput, FieldError, JsonScalar, Priority};
pub use ext::Extensions;
pub use ext_input::{ExtInput, JsonTree};
pub use lastmod::LastMod;
pub use loc::{Loc, MAX_LOC_LEN, MAX_URL_LEN, PublicUrl, absolute_url, rfc3986};
pub use section::{MAX_SECTION_LEN, RESERVED_SECTIONS, Section, SectionNames};
pub use site::{DEFAULT_SITE, LocScope, Site, SiteSpec, Sites};
