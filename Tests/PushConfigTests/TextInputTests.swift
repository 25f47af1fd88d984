import Testing
@testable import PushConfig
import PushPayload

@Suite struct TextInputConfigTests {
    @Test func textInputMakesAnEarlierActionATextInputAction() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", """
            [Category chat]
            Action=reply:Reply:foreground,moRequired
            Action=later:Later:
            TextInput=reply:Send:Your answer: short please
            [Category survey]
            Action=note:Add a note:
            TextInput=note:OK:
            """)
        let config = try dir.load().0
        #expect(config.categories == [
            CategoryDefinition(id: "chat", actions: [
                CategoryAction(id: "reply", title: "Reply", options: [.foreground, .moRequired],
                               textInput: TextInput(buttonTitle: "Send", placeholder: "Your answer: short please")),
                CategoryAction(id: "later", title: "Later", options: []),
            ]),
            CategoryDefinition(id: "survey", actions: [
                CategoryAction(id: "note", title: "Add a note", options: [], textInput: TextInput(buttonTitle: "OK", placeholder: "")),
            ]),
        ])
    }

    @Test(arguments: [
        ("TextInput=reply:Send:x", "no action 'reply' in this category yet"),
        ("Action=reply:Reply:\nTextInput=other:Send:x", "no action 'other'"),
        ("Action=reply:Reply:\nTextInput=reply", "expected ACTION:BUTTON:PLACEHOLDER"),
        ("Action=reply:Reply:\nTextInput=reply:Send", "expected ACTION:BUTTON:PLACEHOLDER"),
        ("Action=reply:Reply:\nTextInput=reply: :x", "empty button title"),
        ("Action=reply:Reply:\nTextInput=mm_reply:Send:x", "reserves"),
        ("Action=reply:Reply:\nTextInput=reply:Send:x\nTextInput=reply:Go:y", "has a text input already"),
        ("Action=reply:Reply:\nInput=reply:Send:x", "knows Action and TextInput"),
    ])
    func badTextInputIsAnErrorAtItsLine(body: String, expected: String) throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Category chat]\n" + body + "\n")
        let error = try #require(dir.error())
        #expect(error.message.contains(expected), "\(error)")
        #expect(error.line == 1 + body.split(separator: "\n").count, "the line of the offending key")
    }

    @Test func mmCategoriesStayRefusedWithTextInput() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Category mm_chat]\nAction=reply:Reply:\nTextInput=reply:Send:x\n")
        let error = try #require(dir.error())
        #expect(error.message.contains("reserves"))
        #expect(error.line == 2)
    }

    @Test func anEmptyTextInputRemovesTheSectionsTextInputs() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Category chat]\nAction=reply:Reply:\nTextInput=reply:Send:x\n")
        try dir.write("pushspool.conf.d/10-off.conf", "[Category chat]\nTextInput=\n")
        #expect(try dir.load().0.categories.first?.actions.first?.textInput == nil)
    }

    @Test func configShowRoundTripsTextInputs() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Category chat]\nAction=reply:Reply: now:foreground\nAction=no:No:\nTextInput=reply:Send:Type: here\n")
        let (config, provenance) = try dir.load()
        let text = renderEffectiveConfiguration(config, provenance: provenance)
        #expect(text.contains("Action=reply:Reply: now:foreground\nAction=no:No:\nTextInput=reply:Send:Type: here\n"))
        #expect(try ConfigurationLoader.load(text: text, path: "shown.conf").0 == config)
    }

    @Test func theCategoryTableCarriesTextInputsBesideTheBuiltIns() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Category chat]\nAction=reply:Reply:moRequired\nTextInput=reply:Send:Your answer\n")
        let table = try dir.load().0.categoryTable()
        #expect(table["mm_accept_decline"] == CategoryTable.builtIn["mm_accept_decline"], "mm_accept_decline stays built in")
        #expect(table["chat"] == NotificationCategory(id: "chat", actions: [
            PushPayload.CategoryAction(id: "reply", title: "Reply", options: [.moRequired], textInput: TextInput(buttonTitle: "Send", placeholder: "Your answer")),
        ]))
        // And the normaliser resolves a push's category into the record's actions with it.
        var options = NormalizerOptions()
        options.categories = table
        guard case .accepted(let n) = Normalizer.normalize(Array(#"{"messageId": "m", "aps": {"alert": "x", "category": "chat"}}"#.utf8), options: options) else {
            Issue.record("refused")
            return
        }
        #expect(n.jsonValue()["actions"]?.arrayValue?.first?["textInput"] == .object(["buttonTitle": .string("Send"), "placeholder": .string("Your answer")]))
    }
}
