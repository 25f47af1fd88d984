/// The pushspool release, reported by `pushspoold --version` and `pushspoolctl --version`.
package let pushspoolVersion = "0.1.0"
