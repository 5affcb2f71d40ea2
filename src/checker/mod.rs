//! URL health's checker: the background task that fetches the stored URLs of the sites that are checked and
//! records what it finds ([`crate::health`] judges, [`crate::store`] keeps). See docs/design/health.md.
