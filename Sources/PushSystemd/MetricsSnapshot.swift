import PushSystem

/// The samples of a Prometheus text file, for `pushspoolctl stats`: the command reads the
/// daemon's textfile (or a `Metrics` renders one), so the CLI and the exporter show the
/// same numbers.
///
/// `Sendable`, `Codable`: plain values; JSON keys are explicit.
package struct MetricsSnapshot: Sendable, Equatable, Codable {
    package struct Sample: Sendable, Equatable, Codable {
        /// The sample name as written, e.g. `pushspool_journal_fsync_seconds_bucket`.
        package var name: String
        package var labels: [String: String]
        package var value: Double

        enum CodingKeys: String, CodingKey { case name, labels, value }

        package init(name: String, labels: [String: String], value: Double) {
            self.name = name
            self.labels = labels
            self.value = value
        }
    }

    package var samples: [Sample]

    enum CodingKeys: String, CodingKey { case samples }

    package init(samples: [Sample]) { self.samples = samples }

    /// Parses the text exposition format; comment lines and lines that do not parse are
    /// skipped (a textfile may carry other tools' metrics).
    package init(prometheusText text: String) {
        var samples: [Sample] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            if let sample = Self.parseSample(line) { samples.append(sample) }
        }
        self.samples = samples
    }

    /// The value of one series, `nil` when absent.
    package func value(_ name: String, labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    /// JSON Lines, one sample per line, keys sorted: for `pushspoolctl stats --json`.
    /// A sample whose value JSON cannot hold (NaN, ±Inf) is left out.
    package func jsonLines() -> String {
        samples.compactMap { sample -> String? in
            guard sample.value.isFinite else { return nil }
            let value = if let exact = Int64(exactly: sample.value) { String(exact) } else { "\(sample.value)" }
            let object = JSONValue.object(["name": .string(sample.name), "labels": .object(JSONObject(sample.labels.mapValues { JSONValue.string($0) })),
                                           "value": .number(value)])
            return object.serializedString() + "\n"
        }.joined()
    }

    /// Aligned `name{labels}  value` lines for people, histogram buckets left out.
    package func table() -> String {
        let rows = samples.filter { !$0.name.hasSuffix("_bucket") }.map { sample -> (String, String) in
            let labels = sample.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            return (labels.isEmpty ? sample.name : "\(sample.name){\(labels)}", PrometheusText.format(sample.value))
        }
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { $0.0 + String(repeating: " ", count: max(0, width - $0.0.count)) + "  " + $0.1 + "\n" }.joined()
    }

    static func parseSample(_ line: Substring) -> Sample? {
        var rest = line[...]
        let name = rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }
        guard !name.isEmpty else { return nil }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let labelName = rest.prefix { $0 != "=" }
                rest = rest.dropFirst(labelName.count)
                guard rest.hasPrefix("=\"") else { return nil }
                rest = rest.dropFirst(2)
                var value = ""
                var escaping = false
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if escaping { value.append(character == "n" ? "\n" : character); escaping = false }
                    else if character == "\\" { escaping = true }
                    else if character == "\"" { break }
                    else { value.append(character) }
                }
                labels[labelName.trimmingSpaces] = value
                if rest.first == "," { rest = rest.dropFirst() }
                guard !rest.isEmpty else { return nil }
            }
            rest = rest.dropFirst()
        }
        let fields = rest.split(separator: " ")
        guard let valueText = fields.first else { return nil }
        let value: Double?
        switch valueText {
        case "+Inf": value = .infinity
        case "-Inf": value = -.infinity
        case "NaN": value = .nan
        default: value = Double(valueText)
        }
        guard let value else { return nil }
        return Sample(name: String(name), labels: labels, value: value)
    }
}
