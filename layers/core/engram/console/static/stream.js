// The WebSocket API (live turns): a one-time ticket from POST /api/stream-tickets opens it (the
// token never goes into a URL). openStream resolves to null when the socket cannot be opened (no
// WebSocket API, a refused ticket, a network that drops it): the chat then works over HTTP.
import { post } from './api.js';

const OPEN_TIMEOUT_MS = 5000;

export async function openStream(onEvent, onClose) {
  let ticket;
  try {
    ticket = await post('/api/stream-tickets');
  } catch {
    return null;
  }
  if (!ticket.url || !/^wss?:\/\//.test(ticket.url)) return null;
  let socket;
  try {
    socket = new WebSocket(`${ticket.url}/?ticket=${encodeURIComponent(ticket.ticket)}`);
  } catch {
    return null;
  }
  const opened = await new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), OPEN_TIMEOUT_MS);
    socket.addEventListener('open', () => { clearTimeout(timer); resolve(true); }, { once: true });
    socket.addEventListener('error', () => { clearTimeout(timer); resolve(false); }, { once: true });
  });
  if (!opened) {
    try { socket.close(); } catch { /* already closed */ }
    return null;
  }
  socket.addEventListener('message', (e) => {
    let event;
    try { event = JSON.parse(e.data); } catch { return; }
    onEvent(event);
  });
  socket.addEventListener('close', () => onClose && onClose());
  return {
    get open() { return socket.readyState === WebSocket.OPEN; },
    send(frame) { socket.send(JSON.stringify(frame)); },
    close() { socket.close(); },
  };
}

// A clientTurnId: the socket's turn is run once however often it is sent.
export function turnId() {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `ct_${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}
