//! The pure translator.
