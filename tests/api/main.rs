//! The API types as users meet them: upstream's YAML round-trips through our types, and the CRDs
//! generated from them (insta snapshots).

#[path = "../common/mod.rs"]
mod common;

mod conversion;
mod crds;
mod round_trip;
