/// The pushspool release, reported by `pushspoold --version` and `pushspoolctl --version`.
/// The one place the version is set: the Debian package takes it from here, and
/// `packaging/build-deb --check-version` (run by scripts/test.sh) fails unless the top entry
/// of debian/changelog carries the same version.
package let pushspoolVersion = "0.1.0"
