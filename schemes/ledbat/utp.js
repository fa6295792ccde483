'use strict'
/*
 * Pantheon's LEDBAT scheme: one bulk uTP flow, run until killed.
 *
 * uTP is BitTorrent's transport over UDP (BEP 29, Norberg, "uTorrent transport protocol", 2009);
 * its congestion control is LEDBAT, the delay-based "less than best effort" controller later
 * standardised as RFC 6817 (Shalunov et al., 2012) and studied in Rossi et al., "LEDBAT: the new
 * BitTorrent congestion control protocol", ICCCN 2010. The sender keeps the minimum one-way delay
 * it has seen as the base delay (RFC 6817 §2.4.2), takes the excess over it as queueing delay, and
 * grows or shrinks its window in proportion to how far that queueing delay is from a fixed target
 * (RFC 6817 §2.4.3); on loss it halves the window like TCP.
 *
 * Nothing of that is implemented here: this file is a thin driver around the real libutp
 * (BitTorrent, Inc.), as bundled and built into an N-API addon by the npm package utp-native
 * (package.json pins it). libutp's constants that shape what we measure, read from its sources
 * in node_modules/utp-native/deps/libutp: target queueing delay 100 ms (CCONTROL_TARGET, which
 * RFC 6817 allows as the upper bound), at most 3000 bytes of window growth per RTT
 * (MAX_CWND_INCREASE_BYTES_PER_RTT), base delay over a 13-minute history, and UDP payloads of at
 * most 1402 bytes (UDP_IPV4_MTU), inside the tunnel's 1436-byte limit.
 *
 *   node utp.js recv ADDR PORT   listen on ADDR:PORT, accept any number of senders, read and discard
 *   node utp.js send PEER PORT   connect to PEER:PORT and write as fast as libutp's window allows
 *
 * Both run until SIGTERM or SIGINT and then exit at once with status 0. The sender tries a fresh
 * connection every second while none is up (the receiver may start later than it, or restart) and
 * exits with status 1 once it has been without one for CONNECT_GIVE_UP_S seconds.
 */
const utp = require('utp-native')

const CHUNK_BYTES = 64 * 1024
/** A fresh connection attempt after this long without an answer: libutp's own SYN retransmission
 * backs off from 3 s and gives up only after about 21 s, too slow for a receiver that starts late. */
const ATTEMPT_MS = 1000
const CONNECT_GIVE_UP_S = 10
const USAGE = 'usage: node utp.js recv ADDR PORT | node utp.js send PEER PORT'

function fail (message) {
  process.stderr.write(`utp.js: ${message}\n`)
  process.exit(1)
}

function parseArgs (argv) {
  const [role, host, portText] = argv
  if (argv.length !== 3 || (role !== 'recv' && role !== 'send')) {
    process.stderr.write(`${USAGE}\n`)
    process.exit(2)
  }
  const port = Number(portText)
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    process.stderr.write(`utp.js: port must be an integer in 1..65535, not '${portText}'\n${USAGE}\n`)
    process.exit(2)
  }
  if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(host)) {
    process.stderr.write(`utp.js: address must be an IPv4 address, not '${host}'\n${USAGE}\n`)
    process.exit(2)
  }
  return { role, host, port }
}

function receive (addr, port) {
  const server = utp.createServer((conn) => {
    const peer = `${conn.remoteAddress}:${conn.remotePort}`
    process.stderr.write(`utp.js: receiving from ${peer}\n`)
    conn.on('data', () => {})
    // A sender that goes away ends or resets its connection; the server keeps listening.
    conn.on('error', (err) => process.stderr.write(`utp.js: connection from ${peer}: ${err.message}\n`))
    conn.on('end', () => conn.end())
  })
  server.on('error', (err) => fail(`cannot listen on ${addr}:${port}: ${err.message}`))
  server.listen(port, addr, () => process.stderr.write(`utp.js: listening on ${addr}:${port}\n`))
}

function send (peer, port) {
  const chunk = Buffer.alloc(CHUNK_BYTES, 'x')
  let lastUpMs = Date.now()

  function attempt () {
    if (Date.now() - lastUpMs > CONNECT_GIVE_UP_S * 1000) {
      fail(`no uTP receiver answered at ${peer}:${port} for ${CONNECT_GIVE_UP_S} s; is the receiver running?`)
    }
    const conn = utp.connect(port, peer)
    let up = false
    const retry = setTimeout(() => conn.destroy(), ATTEMPT_MS)
    conn.on('connect', () => {
      up = true
      clearTimeout(retry)
      process.stderr.write(`utp.js: sending to ${peer}:${port}\n`)
    })
    conn.on('error', (err) => {
      if (up) process.stderr.write(`utp.js: connection to ${peer}:${port}: ${err.message}\n`)
    })
    conn.on('close', () => {
      clearTimeout(retry)
      if (up) lastUpMs = Date.now()
      attempt()
    })
    // Writes before the handshake completes are held by utp-native and go out once it does.
    const pump = () => {
      while (!conn.destroyed && conn.write(chunk));
    }
    conn.on('drain', pump)
    pump()
  }
  attempt()
}

for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0))
const { role, host, port } = parseArgs(process.argv.slice(2))
if (role === 'recv') receive(host, port)
else send(host, port)
