// What the signed-in user may do, mirroring the server's permission rules (lurcher.auth.
// permissions). Used only to decide which actions to offer: the server checks every request.

export class Capabilities {
  constructor(permissions) {
    this.p = permissions || { global: {}, streams: null };
    this.g = this.p.global || {};
  }

  stream(sid) { return (this.p.streams || {})[String(sid)] || {}; }
  topic(sid, tid) { return ((this.stream(sid).topics) || {})[String(tid)] || {}; }

  get readServers() { return Boolean(this.g.manage_servers || this.g.read_servers); }
  get readUsers() { return Boolean(this.g.manage_users || this.g.read_users); }
  get manageUsers() { return Boolean(this.g.manage_users); }
  get createStream() { return Boolean(this.g.manage_streams); }

  manageStream(sid) { return Boolean(this.g.manage_streams || this.stream(sid).manage_stream); }

  createTopic(sid) {
    const s = this.stream(sid);
    return Boolean(this.g.manage_streams || this.g.manage_topics || s.manage_stream || s.manage_topics);
  }

  manageTopic(sid, tid) { return this.createTopic(sid) || Boolean(this.topic(sid, tid).manage_topic); }

  readTopics(sid) {
    const g = this.g;
    const s = this.stream(sid);
    return Boolean(g.read_streams || g.manage_streams || g.manage_topics || g.read_topics ||
      s.manage_stream || s.read_stream || s.manage_topics || s.read_topics);
  }

  poll(sid, tid) {
    const s = this.stream(sid);
    const t = this.topic(sid, tid);
    return Boolean(this.g.poll_messages || this.readTopics(sid) || s.poll_messages ||
      t.manage_topic || t.read_topic || t.poll_messages);
  }

  send(sid, tid) {
    const g = this.g;
    const s = this.stream(sid);
    const t = this.topic(sid, tid);
    return Boolean(g.send_messages || g.manage_streams || g.manage_topics || s.manage_stream ||
      s.manage_topics || s.send_messages || t.manage_topic || t.send_messages);
  }
}
