@preconcurrency import Glibc

extension ConfigOverride {
    /// `--spool`/`--state-dir` as configuration overrides (relative paths made absolute),
    /// shared by `pushspoold` and `pushspoolctl` so both see the same effective configuration.
    package static func paths(spool: String?, stateDirectory: String?) -> [ConfigOverride] {
        var overrides: [ConfigOverride] = []
        if let spool { overrides.append(ConfigOverride(section: "Spool", key: "Directory", value: absolutePath(spool))) }
        if let stateDirectory {
            overrides.append(ConfigOverride(section: "Journal", key: "StateDirectory", value: absolutePath(stateDirectory)))
        }
        return overrides
    }
}

/// `path` made absolute against the working directory.
package func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard getcwd(&buffer, buffer.count) != nil else { return path }
    let cwd = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let trimmed = path.hasPrefix("./") ? String(path.dropFirst(2)) : path
    return cwd == "/" ? "/" + trimmed : cwd + "/" + trimmed
}
