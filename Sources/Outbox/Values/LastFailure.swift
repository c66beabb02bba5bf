/// What a write met the last time it failed alone: the status and the start of a text body.
public struct LastFailure: Hashable, Sendable {
    /// The HTTP status it failed with, if one came.
    public var status: Int?
    /// Cut to 200 Unicode scalars; audits only.
    public var text: String?
    /// A failure with its status and the start of the server's text.
    public init(status: Int?, text: String?) {
        self.status = status
        self.text = text
    }
}
