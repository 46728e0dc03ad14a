// What the analysis page shows of a game's review and reads from a link, as functions of their inputs alone. The
// review itself is the server's (POST /v1/review: searchless.play.review, what searchless-review computes too).

// The marks of the review, worst first: name, sign, key (with shift: backwards).
export const MARKS = [['blunder', '??', 'b'], ['mistake', '?', 'm'], ['inaccuracy', '?!', 'i']]
const PARAMS = ['fen', 'moves', 'ply', 'side']  // What a link's hash may hold.
const PLURAL = {inaccuracy: 'inaccuracies', mistake: 'mistakes', blunder: 'blunders'}

export function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'})[c])
}

// The review's mark of the move played from `ply` ({name, sign, drop}), or null.
export function markOf(review, ply) {
  const move = review?.moves[ply]
  if (!move || !move.mark) return null
  return {name: move.mark, sign: MARKS.find(([name]) => name === move.mark)[1], drop: move.drop}
}

// The position after the next (`step` 1) or previous (-1) move marked `name` from the position after `ply`
// moves, or null.
export function markedPly(review, ply, name, step) {
  const moves = review?.moves || []
  const order = step > 0 ? moves.map((_, i) => i) : moves.map((_, i) => moves.length - 1 - i)
  const found = order.find((i) => moves[i].mark === name && (step > 0 ? i + 1 > ply : i + 1 < ply))
  return found === undefined ? null : found + 1
}

// Each player's accuracy and marks, a line each ('' before the review).
export function summaryHtml(players) {
  if (!players) return ''
  const say = (p) => (p.accuracy === null ? '' : `${p.accuracy.toFixed(1)}% accuracy, `)
    + MARKS.map(([name]) => `${p[name]} ${p[name] === 1 ? name : PLURAL[name]}`).join(', ')
  return ['white', 'black'].map((color) => `<div id="summary-${color}">
    ${color === 'white' ? 'White' : 'Black'}: ${say(players[color])}.</div>`).join('')
}

// A link's game ({fen, moves, ply, side}) from its hash, and what is wrong with it (`problem`: a message, or '').
export function readLink(hash, start) {
  const params = new URLSearchParams(hash)
  const problems = []
  const unknown = [...params.keys()].filter((key) => !PARAMS.includes(key))
  if (unknown.length) problems.push(`"${unknown[0].slice(0, 40)}" is not a link's field (fen, moves, ply, side)`)
  const moves = (params.get('moves') || '').split(',').filter(Boolean).map((uci) => ({uci, san: uci}))
  let ply = moves.length
  if (params.has('ply')) {
    const text = params.get('ply')
    if (/^\d+$/.test(text)) ply = Math.min(Number(text), moves.length)
    else problems.push(`ply=${text.slice(0, 20)} is not a move number: showing the last move`)
  }
  let side = 'none'
  if (params.has('side')) {
    if (['white', 'black', 'none'].includes(params.get('side'))) side = params.get('side')
    else problems.push(`side=${params.get('side').slice(0, 20)} is not white, black or none`)
  }
  return {fen: params.get('fen') || start, moves, ply, side, problem: problems.join('; ')}
}
