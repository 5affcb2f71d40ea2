//! The IP ranges a crawler's operator publishes (helper: being written).

/// A set of IP networks, parsed from an operator's range file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpRanges {}

impl IpRanges {
    pub fn contains(&self, _ip: std::net::IpAddr) -> bool {
        false
    }
}
