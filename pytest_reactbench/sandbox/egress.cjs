// The egress gate of an agent that declares model hosts: the only network it gets.
//
//   node egress.cjs proxy LISTEN HOST[,HOST...] [FROM=TO,...]
//                                                 an HTTP proxy (CONNECT and plain
//                                                 HTTP) that reaches the listed hosts
//                                                 and their subdomains, and refuses
//                                                 every other one with 403; a HOST
//                                                 written HOST:PORT is that port only.
//                                                 FROM=TO (host:port each) connects to
//                                                 TO for FROM (a host's loopback port,
//                                                 relayed on an address this proxy
//                                                 reaches)
//   node egress.cjs check HOST[,HOST...] TARGET...
//                                                 before any sandbox: each TARGET
//                                                 (host:port) the proxy over that list
//                                                 would refuse, a line each on stdout
//                                                 (exit 1 if any)
//   node egress.cjs forward PORT SOCKET READY     in a sandbox without network: serve
//                                                 127.0.0.1:PORT by relaying to the
//                                                 proxy's unix SOCKET; touch READY
//   node egress.cjs tunnel PORT PROXY_HOST PROXY_PORT TARGET READY
//                                                 in the sandbox: serve 127.0.0.1:PORT
//                                                 by a CONNECT to TARGET through the
//                                                 proxy (a model gateway on the host's
//                                                 loopback, reached at the address a
//                                                 client that skips the proxy for
//                                                 127.0.0.1 uses); touch READY
//
// LISTEN is a TCP port or a unix socket path. Each refusal is logged to stderr, and
// every request the proxy saw is a JSON line on stdout (host, port, method, and the
// upstream's status or the error that stopped it), for the trial's record.
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const net = require("node:net");

// `host` (and its port) against the list: a name and its subdomains, any port; a
// HOST:PORT entry, that port of that host only.
function note(record) {
  process.stdout.write(`${JSON.stringify({ t: Date.now(), ...record })}\n`);
}

// A host name as compared: lower case, without a final dot or an IPv6 address's brackets.
const bare = (host) => String(host || "").toLowerCase().replace(/\.$/, "").replace(/^\[|\]$/g, "");

function allowed(hosts, host, port) {
  const name = bare(host);
  return hosts.some((h) => {
    const at = h.lastIndexOf(":");
    if (at > 0 && /^\d+$/.test(h.slice(at + 1))) return name === bare(h.slice(0, at)) && String(port) === h.slice(at + 1);
    return name === bare(h) || name.endsWith(`.${bare(h)}`);
  });
}

// Where to connect for host:port: its rewrite, or itself.
function target(rewrites, host, port) {
  const to = rewrites.get(`${String(host).toLowerCase()}:${port}`);
  if (!to) return { host, port: Number(port) };
  const at = to.lastIndexOf(":");
  return { host: to.slice(0, at), port: Number(to.slice(at + 1)) };
}

function proxy(listen, hostList, rewriteList = "") {
  const hosts = hostList.split(",").map((h) => h.trim().toLowerCase()).filter(Boolean);
  const rewrites = new Map(rewriteList.split(",").filter(Boolean).map((r) => r.split("=")));
  const server = http.createServer((req, res) => {
    let url;
    try {
      url = new URL(req.url);
    } catch {
      res.writeHead(400).end("absolute URL expected\n");
      return;
    }
    const port = Number(url.port) || 80;
    const seen = { method: req.method, host: url.hostname, port };
    if (!allowed(hosts, url.hostname, port)) {
      console.error(`egress: refused ${url.hostname}`);
      note({ ...seen, refused: true });
      res.writeHead(403).end(`egress to ${url.hostname} is not allowed\n`);
      return;
    }
    const to = target(rewrites, url.hostname, port);
    const upstream = http.request({ host: to.host, port: to.port, path: `${url.pathname}${url.search}`,
      method: req.method, headers: req.headers }, (up) => {
      note({ ...seen, status: up.statusCode });
      res.writeHead(up.statusCode || 502, up.headers);
      up.pipe(res);
    });
    upstream.on("error", (error) => {
      note({ ...seen, error: error.code || error.message });
      res.writeHead(502).end();
    });
    req.pipe(upstream);
  });
  // A plain-HTTP request asking to upgrade (a ws:// WebSocket, as Codex opens first):
  // relayed as raw bytes once the host is allowed, so the client gets the server's own answer.
  server.on("upgrade", (req, socket, head) => {
    // A client that resets must never take the gate down with it.
    socket.on("error", () => {});
    let url;
    try {
      url = new URL(req.url);
    } catch {
      socket.end("HTTP/1.1 400 Bad Request\r\n\r\n");
      return;
    }
    if (!allowed(hosts, url.hostname, Number(url.port) || 80)) {
      console.error(`egress: refused ${url.hostname}`);
      socket.end(`HTTP/1.1 403 Forbidden\r\n\r\negress to ${url.hostname} is not allowed\n`);
      return;
    }
    const to = target(rewrites, url.hostname, Number(url.port) || 80);
    const upstream = net.connect(to.port, to.host, () => {
      const lines = [`${req.method} ${url.pathname}${url.search} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      }
      upstream.write(lines.join("\r\n") + "\r\n\r\n");
      if (head && head.length) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on("error", () => socket.destroy());
    socket.on("close", () => upstream.destroy());
  });
  server.on("connect", (req, socket, head) => {
    socket.on("error", () => {});
    const [host, port] = String(req.url).split(":");
    const seen = { method: "CONNECT", host, port: Number(port) || 443 };
    if (!allowed(hosts, host, Number(port) || 443)) {
      console.error(`egress: refused ${host}`);
      note({ ...seen, refused: true });
      socket.end(`HTTP/1.1 403 Forbidden\r\n\r\negress to ${host} is not allowed\n`);
      return;
    }
    const to = target(rewrites, host, Number(port) || 443);
    let connected = false;
    const upstream = net.connect(to.port, to.host, () => {
      connected = true;
      note({ ...seen, status: 200 });
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head && head.length) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on("error", (error) => {
      if (!connected) note({ ...seen, error: error.code || error.message });
      socket.destroy();
    });
    socket.on("close", () => upstream.destroy());
  });
  server.on("clientError", (err, socket) => socket.destroy());
  const port = Number(listen);
  if (Number.isInteger(port) && port > 0) server.listen(port, "0.0.0.0");
  else {
    try {
      fs.unlinkSync(listen);
    } catch {}
    server.listen(listen);
  }
}

function forward(port, socketPath, ready) {
  const server = net.createServer((client) => {
    const upstream = net.connect(socketPath);
    client.pipe(upstream);
    upstream.pipe(client);
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
  });
  server.listen(Number(port), "127.0.0.1", () => fs.writeFileSync(ready, ""));
}

function tunnel(port, proxyHost, proxyPort, target, ready) {
  const server = net.createServer((client) => {
    client.on("error", () => {});
    client.pause();
    const upstream = net.connect(Number(proxyPort), proxyHost, () => {
      upstream.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
    });
    let head = Buffer.alloc(0);
    const answered = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      upstream.off("data", answered);
      if (!/^HTTP\/1\.[01] 200/.test(head.toString("latin1", 0, end))) {
        client.destroy();
        upstream.destroy();
        return;
      }
      if (head.length > end + 4) client.write(head.subarray(end + 4));
      upstream.pipe(client);
      client.pipe(upstream);
      client.resume();
    };
    upstream.on("data", answered);
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
  });
  server.listen(Number(port), "127.0.0.1", () => fs.writeFileSync(ready, ""));
}

const [mode, ...args] = process.argv.slice(2);
if (mode === "proxy" && (args.length === 2 || args.length === 3)) proxy(args[0], args[1], args[2]);
else if (mode === "check" && args.length >= 1) {
  const hosts = args[0].split(",").map((h) => h.trim().toLowerCase()).filter(Boolean);
  const refused = args.slice(1).filter((t) => {
    const at = t.lastIndexOf(":");
    return !allowed(hosts, t.slice(0, at), t.slice(at + 1));
  });
  for (const t of refused) console.log(t);
  process.exit(refused.length ? 1 : 0);
}
else if (mode === "forward" && args.length === 3) forward(args[0], args[1], args[2]);
else if (mode === "tunnel" && args.length === 5) tunnel(...args);
else {
  console.error("usage: egress.cjs proxy LISTEN HOSTS [REWRITES] | forward PORT SOCKET READY | "
    + "tunnel PORT PROXY_HOST PROXY_PORT TARGET READY");
  process.exit(2);
}
