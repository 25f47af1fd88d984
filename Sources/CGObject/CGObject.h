/* Carries GLib's pkg-config flags (gobject-2.0: the include paths libvips' headers need) to
   CVipsShim. Declares nothing: Swift never imports GLib; only the shim's C code includes it. */
