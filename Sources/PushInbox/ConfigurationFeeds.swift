import PushConfig

package extension Configuration {
    /// The `[Feed NAME]` sections as the inbox index applies them (``InboxFeed``), in order.
    var inboxFeeds: [InboxFeed] {
        feeds.map {
            InboxFeed(name: $0.name, categories: $0.categories, vendors: $0.vendors, payloadKey: $0.payloadKey,
                      payloadValue: $0.payloadValue, rest: $0.other)
        }
    }
}
