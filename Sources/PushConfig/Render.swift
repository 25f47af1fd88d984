/// The effective configuration as pushspool.conf text, each value preceded by where it came
/// from (`# default`, `# /etc/pushspool/pushspool.conf:12`, `# command line`), for
/// `pushspoolctl config show`. Reading the output back yields the same configuration.
package func renderEffectiveConfiguration(
    _ configuration: Configuration,
    provenance: [String: ConfigurationSource] = [:]
) -> String {
    var out = ""
    for section in Schema.sections {
        if !out.isEmpty { out += "\n" }
        out += "[\(section)]\n"
        for spec in Schema.keys(in: section) {
            out += "# \((provenance[spec.path] ?? .defaultValue).description)\n"
            for value in spec.render(configuration) {
                out += "\(spec.key)=\(value)\n"
            }
        }
    }
    for category in configuration.categories {
        let section = Schema.categoryPrefix + category.id
        out += "\n[\(section)]\n"
        out += "# \((provenance["\(section).Action"] ?? .defaultValue).description)\n"
        for action in category.actions {
            out += "Action=\(action.id):\(action.title):\(action.options.map(\.rawValue).joined(separator: ","))\n"
        }
        for action in category.actions {
            if let input = action.textInput { out += "TextInput=\(action.id):\(input.buttonTitle):\(input.placeholder)\n" }
        }
    }
    for feed in configuration.feeds {
        let section = Schema.feedPrefix + feed.name
        out += "\n[\(section)]\n"
        func put(_ key: String, _ value: String?) {
            guard let value else { return }
            out += "# \((provenance["\(section).\(key)"] ?? .defaultValue).description)\n\(key)=\(value)\n"
        }
        put("Categories", feed.categories.isEmpty ? nil : feed.categories.joined(separator: " "))
        put("Vendors", feed.vendors.isEmpty ? nil : feed.vendors.joined(separator: " "))
        put("PayloadKey", feed.payloadKey)
        put("PayloadValue", feed.payloadValue)
        put("Other", feed.other ? "yes" : nil)
    }
    return out
}
