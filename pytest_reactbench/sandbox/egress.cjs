// The egress gate of an agent that declares model hosts: the only network it gets.
//
//   node egress.cjs proxy LISTEN HOST[,HOST...]   an HTTP proxy (CONNECT and plain
//                                                 HTTP) that reaches the listed hosts
//                                                 and their subdomains, and refuses
//                                                 every other one with 403
//   node egress.cjs forward PORT SOCKET READY     in a sandbox without network: serve
//                                                 127.0.0.1:PORT by relaying to the
//                                                 proxy's unix SOCKET; touch READY
//
// LISTEN is a TCP port or a unix socket path. Each refusal is logged to stderr.
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const net = require("node:net");

function allowed(hosts, host) {
  const name = String(host || "").toLowerCase().replace(/\.$/, "");
  return hosts.some((h) => name === h || name.endsWith(`.${h}`));
}

function proxy(listen, hostList) {
  const hosts = hostList.split(",").map((h) => h.trim().toLowerCase()).filter(Boolean);
  const server = http.createServer((req, res) => {
    let url;
    try {
      url = new URL(req.url);
    } catch {
      res.writeHead(400).end("absolute URL expected\n");
      return;
    }
    if (!allowed(hosts, url.hostname)) {
      console.error(`egress: refused ${url.hostname}`);
      res.writeHead(403).end(`egress to ${url.hostname} is not allowed\n`);
      return;
    }
    const upstream = http.request(url, { method: req.method, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode || 502, up.headers);
      up.pipe(res);
    });
    upstream.on("error", () => res.writeHead(502).end());
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
    if (!allowed(hosts, url.hostname)) {
      console.error(`egress: refused ${url.hostname}`);
      socket.end(`HTTP/1.1 403 Forbidden\r\n\r\negress to ${url.hostname} is not allowed\n`);
      return;
    }
    const upstream = net.connect(Number(url.port) || 80, url.hostname, () => {
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
    if (!allowed(hosts, host)) {
      console.error(`egress: refused ${host}`);
      socket.end(`HTTP/1.1 403 Forbidden\r\n\r\negress to ${host} is not allowed\n`);
      return;
    }
    const upstream = net.connect(Number(port) || 443, host, () => {
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head && head.length) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on("error", () => socket.destroy());
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

const [mode, ...args] = process.argv.slice(2);
if (mode === "proxy" && args.length === 2) proxy(args[0], args[1]);
else if (mode === "forward" && args.length === 3) forward(args[0], args[1], args[2]);
else {
  console.error("usage: egress.cjs proxy LISTEN HOSTS | forward PORT SOCKET READY");
  process.exit(2);
}
