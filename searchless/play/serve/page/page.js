// The analysis page of searchless-serve: the model's win% for every legal move, arrows, an eval bar, a game
// stepped through with its win% graph and marked moves, play against the model, Stockfish beside it.
// Everything comes from the server's JSON API (docs/serve.md); chess rules are the server's (python-chess), and so
// is the game's review (POST /v1/review: the marks and each player's accuracy, as searchless-review computes them).
import {Chessboard, COLOR, INPUT_EVENT_TYPE} from './vendor/cm-chessboard/src/Chessboard.js'
import {MARKS, escapeHtml, markOf, markedPly, readLink, summaryHtml} from './review.js'
import {request, svgArrow} from './parts.js'

const START = 'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1'
const CHUNK = 64  // Positions per /v1/analyse request when a game is analysed.
const ARROWS = 3  // Arrows on the best moves.
const $ = (id) => document.getElementById(id)

const state = {
  startFen: START,
  moves: [],  // The game: [{uci, san}].
  ply: 0,  // The position shown: after moves[0..ply).
  analyses: [],  // analyses[i]: the model's answer for the position after i moves.
  review: null,  // POST /v1/review's answer for the game, once it is analysed.
  side: 'none',  // The user's colour against the model; 'none': analysis.
  info: null,  // GET /v1/info.
  stockfish: new Map(),  // FEN -> /v1/stockfish's answer.
  search: new Map(),  // FEN -> /v1/play's answer.
  version: 0,  // Bumped at every change of the game: answers for an older one are dropped.
}

let board = null

const api = (path, body) => request(path, body, setStatus)

function setStatus(text) { $('status').textContent = text }
function showError(error) { $('error').textContent = error ? String(error.message || error) : '' }
const percent = (p) => (100 * p).toFixed(1)
const whiteWin = (a) => a.side_to_move === 'white' ? a.value : 1 - a.value

// The model's analyses of the positions after `plies` moves (those not known yet), in batches.
async function analyse(plies) {
  const version = state.version
  const missing = plies.filter((i) => state.analyses[i] === undefined)
  for (let start = 0; start < missing.length; start += CHUNK) {
    const chunk = missing.slice(start, start + CHUNK)
    const positions = chunk.map((i) => ({fen: state.startFen, moves: state.moves.slice(0, i).map((m) => m.uci)}))
    const answer = await api('/v1/analyse', {positions})
    if (version !== state.version) return false
    chunk.forEach((ply, k) => { state.analyses[ply] = answer.positions[k] })
  }
  return true
}

function judgement(ply) { return markOf(state.review, ply) }

// The review of the whole game (marks, accuracy), once its positions are analysed.
async function reviewGame() {
  if (state.review || !state.moves.length || state.analyses[0]?.value == null) return false
  const version = state.version
  const answer = await api('/v1/review', {fen: state.startFen, moves: state.moves.map((m) => m.uci)})
  if (version !== state.version) return false
  state.review = answer
  return true
}

const arrow = (from, to, colour, width, label) =>
  svgArrow(from, to, colour, width, label, board.getOrientation() === COLOR.white)

function drawArrows(analysis) {
  const parts = []
  const stockfish = state.stockfish.get(analysis.fen)
  if (stockfish && stockfish.move && stockfish.move !== analysis.moves[0]?.uci) {
    parts.push(arrow(stockfish.move.slice(0, 2), stockfish.move.slice(2, 4), '#2e7d32', 14, percent(stockfish.win)))
  }
  analysis.moves.slice(0, ARROWS).forEach((move, rank) => {
    if (rank > 0 && move.uci === stockfish?.move) return  // Stockfish's arrow is there.
    const value = move.win ?? move.probability
    parts.push(arrow(move.uci.slice(0, 2), move.uci.slice(2, 4), '#1565c0', 20 - 5 * rank, percent(value)))
  })
  $('arrows').innerHTML = parts.reverse().join('')
}

function drawEvalBar(analysis) {
  if (analysis.value === null) return
  const white = whiteWin(analysis)
  $('evalbar-white').style.height = `${100 * white}%`
  $('evalbar-text').textContent = percent(white)
}

function drawMoves(analysis) {
  const key = analysis.moves[0]?.win === undefined ? 'probability' : 'win'
  $('moves').querySelector('th:nth-child(2)').textContent = key === 'win' ? 'win%' : 'prob%'
  $('moves').tBodies[0].innerHTML = analysis.moves.map((m) => `<tr data-uci="${m.uci}"><td>${m.san}</td>
    <td>${percent(m[key])}</td><td><div class="bar" style="width:${100 * m[key]}%"></div></td></tr>`).join('')
  const best = analysis.best
  const outcome = analysis.outcome
  $('model-best').innerHTML = outcome && !best ? `Game over: <b>${outcome.result}</b> (${outcome.termination})`
    : `${state.info.model}: <b>${best.san}</b> ${key === 'win' ? percent(best.win) + '% to win' : ''}`
      + (outcome ? ` (game over: ${outcome.result}, ${outcome.termination})` : '')
}

function drawEngines(analysis) {
  const stockfish = state.stockfish.get(analysis.fen)
  $('stockfish-best').hidden = !state.info.stockfish
  if (state.info.stockfish) {
    const agrees = stockfish && stockfish.move === analysis.best?.uci
    $('stockfish-best').innerHTML = !stockfish ? `${state.info.stockfish}: …` : !stockfish.move ? '' :
      `${stockfish.engine}: <b>${stockfish.san}</b> ${percent(stockfish.win)}% to win, depth ${stockfish.depth}`
      + (agrees ? '' : ` <span class="disagree">(the model prefers ${analysis.best?.san})</span>`)
  }
  const search = state.search.get(analysis.fen)
  $('play-best').hidden = !state.info.play
  if (state.info.play) {
    $('play-best').innerHTML = !search ? `${state.info.play}: …` : !search.move ? '' :
      `${search.agent}: <b>${search.san}</b> ${percent(search.win)}% to win, depth ${search.depth}`
      + (search.visits !== undefined ? `, ${search.visits} visits` : `, ${search.nodes} nodes`)
      + `<div id="pv" title="The search's principal variation">${escapeHtml(search.pv_san || '')}</div>`
  }
}

function drawGame() {
  const items = state.moves.map((move, i) => {
    const mark = judgement(i)
    const number = i % 2 === 0 ? `${Math.floor(i / 2) + 1}. ` : ''
    const current = i + 1 === state.ply ? ' current' : ''
    return `<li>${number}<span data-ply="${i + 1}" class="${mark ? mark.name : ''}${current}"
      title="${mark ? `${mark.name}: -${percent(mark.drop)}%` : ''}">${move.san}${mark ? mark.sign : ''}</span></li>`
  })
  $('game').innerHTML = items.join('')
  $('summary').innerHTML = summaryHtml(state.review?.players)
}

function drawGraph() {
  const n = state.moves.length
  const x = (i) => n ? (600 * i) / n : 0
  const points = []
  for (let i = 0; i <= n; i++) {
    const a = state.analyses[i]
    if (a && a.value !== null) points.push(`${x(i).toFixed(1)},${(120 * (1 - whiteWin(a))).toFixed(1)}`)
  }
  const dots = state.moves.map((_, i) => {
    const mark = judgement(i), a = state.analyses[i + 1]
    return mark && a && a.value !== null ? `<circle class="${mark.name}" cx="${x(i + 1)}" cy="${120 * (1 - whiteWin(a))}"
      r="4" fill="var(--${mark.name})"/>` : ''
  })
  $('graph').innerHTML = `<rect width="600" height="120" fill="#fff"/><line x1="0" y1="60" x2="600" y2="60" stroke="#ccc"/>
    <polyline points="${points.join(' ')}" fill="none" stroke="#1565c0" stroke-width="2" vector-effect="non-scaling-stroke"/>
    ${dots.join('')}<line x1="${x(state.ply)}" y1="0" x2="${x(state.ply)}" y2="120" stroke="#888" stroke-dasharray="3"/>`
}

function writeUrl() {
  const params = new URLSearchParams()
  if (state.startFen !== START) params.set('fen', state.startFen)
  if (state.moves.length) params.set('moves', state.moves.map((m) => m.uci).join(','))
  if (state.ply !== state.moves.length) params.set('ply', String(state.ply))
  if (state.side !== 'none') params.set('side', state.side)
  history.replaceState(null, '', params.toString() ? `#${params}` : location.pathname)
}

let shownPly = 0  // The ply on the board: a step of one move is animated, a jump is not.

// Draws the position of `state.ply` and what is known of it; resolves when the board shows it.
function render() {
  const analysis = state.analyses[state.ply]
  if (!analysis) return Promise.resolve()
  const placed = board.setPosition(analysis.fen, Math.abs(state.ply - shownPly) === 1)
  shownPly = state.ply
  $('fen').value = analysis.fen
  drawArrows(analysis)
  drawEvalBar(analysis)
  drawMoves(analysis)
  drawEngines(analysis)
  drawGame()
  drawGraph()
  writeUrl()
  return placed
}

// Shows the position after `ply` moves, the engines' views beside, and the model's reply when it is its turn;
// `message`: what to say under it (a link's error), else nothing.
async function show(ply, message = '') {
  state.ply = Math.max(0, Math.min(ply, state.moves.length))
  document.body.dataset.busy = 'true'
  showError(message)
  try {
    const version = state.version
    if (!(await analyse([state.ply]))) return
    await render()
    const analysis = state.analyses[state.ply]
    if (state.info.stockfish && !state.stockfish.has(analysis.fen)) {
      const answer = await api('/v1/stockfish', {fen: analysis.fen})
      state.stockfish.set(analysis.fen, answer)
      if (version === state.version && state.analyses[state.ply] === analysis) await render()
    }
    if (state.info.play && analysis.moves.length && !state.search.has(analysis.fen)) {  // The search's line.
      const answer = await api('/v1/play', {fen: analysis.fen})
      state.search.set(analysis.fen, answer)
      if (version === state.version && state.analyses[state.ply] === analysis) await render()
    }
    await replyIfModelsTurn(analysis, version)
  } catch (error) {
    showError(error)
  } finally {
    document.body.dataset.busy = 'false'
    document.body.dataset.ply = String(state.ply)
  }
  document.body.dataset.game = 'analysing'
  try {  // The graph, the marks and the accuracy of the whole game.
    if (await analyse(Array.from({length: state.moves.length + 1}, (_, i) => i))) await render()
    if (await reviewGame()) await render()
  } catch (error) {
    showError(error)
  } finally {
    document.body.dataset.game = 'done'
  }
}

async function replyIfModelsTurn(analysis, version) {
  const models = state.side !== 'none' && analysis.side_to_move !== state.side
  if (!models || state.ply !== state.moves.length || !analysis.moves.length) return
  let move = analysis.best
  if (state.info.play && $('use-search')?.checked) {
    const answer = state.search.get(analysis.fen) || await api('/v1/play', {fen: analysis.fen})
    state.search.set(analysis.fen, answer)
    move = {uci: answer.move, san: answer.san}
  }
  if (version !== state.version) return
  await play(move.uci, move.san)
}

function setGame(startFen, moves, ply) {
  state.version++
  state.startFen = startFen
  state.moves = moves
  state.analyses = []
  state.review = null
  return show(ply)
}

async function play(uci, san) {
  state.version++
  state.moves = state.moves.slice(0, state.ply).concat([{uci, san}])
  state.analyses = state.analyses.slice(0, state.ply + 1)
  state.review = null
  await show(state.ply + 1)
}

function onMoveInput(event) {
  const analysis = state.analyses[state.ply]
  if (!analysis || document.body.dataset.busy === 'true') return false
  const yours = state.side === 'none' || analysis.side_to_move === state.side
  if (event.type === INPUT_EVENT_TYPE.moveInputStarted) {
    return yours && analysis.moves.some((m) => m.uci.startsWith(event.squareFrom))
  }
  if (event.type === INPUT_EVENT_TYPE.validateMoveInput) {
    const plain = event.squareFrom + event.squareTo
    const move = analysis.moves.find((m) => m.uci === plain)
      || analysis.moves.find((m) => m.uci === plain + $('promotion').value)
    if (!move) return false
    play(move.uci, move.san)
    return true
  }
  return true
}

function setSide(side) {
  state.side = side
  $('side').value = side
  board.setOrientation(side === 'black' ? COLOR.black : COLOR.white)
}

// Opens the link's game. A link that names no game the server accepts says why, and keeps the game on screen
// (the start position when the page opens with it).
async function loadFromUrl() {
  const link = readLink(location.hash.slice(1), START)
  const before = {startFen: state.startFen, moves: state.moves, ply: state.ply}
  setSide(link.side)
  state.version++
  state.startFen = link.fen
  state.moves = link.moves
  state.analyses = []
  state.review = null
  try {  // The moves' SAN (castling as the king takes its rook becomes O-O), from the server's replay of the game.
    const version = state.version
    const start = await api('/v1/analyse', {fen: link.fen})  // Its error names the fen.
    if (version !== state.version) return
    state.analyses[0] = start
    if (link.moves.length) {
      const answer = await api('/v1/review', {fen: link.fen, moves: link.moves.map((m) => m.uci)})
      if (version !== state.version) return
      state.moves = answer.moves.map((m) => ({uci: m.uci, san: m.san}))
      state.review = answer
    }
  } catch (error) {
    state.version++
    state.startFen = before.startFen
    state.moves = before.moves
    state.analyses = []
    state.review = null
    await show(before.ply, `the link's game: ${error.message}`)
    return
  }
  await show(link.ply, link.problem ? `the link: ${link.problem}` : '')
}

function wire() {
  $('first').onclick = () => show(0)
  $('back').onclick = () => show(state.ply - 1)
  $('forward').onclick = () => show(state.ply + 1)
  $('last').onclick = () => show(state.moves.length)
  $('flip').onclick = () => {
    board.setOrientation(board.getOrientation() === COLOR.white ? COLOR.black : COLOR.white)
    render()
  }
  $('takeback').onclick = () => {
    let keep = Math.min(state.ply, state.moves.length) - 1
    const models = (i) => state.side !== 'none' && state.analyses[i]?.side_to_move !== state.side
    if (keep > 0 && models(keep)) keep--  // The model's reply goes with the move it answered.
    if (keep < 0) return
    state.version++
    state.moves = state.moves.slice(0, keep)
    state.analyses = state.analyses.slice(0, keep + 1)
    show(keep)
  }
  $('side').onchange = () => {
    state.side = $('side').value
    board.setOrientation(state.side === 'black' ? COLOR.black : COLOR.white)
    show(state.ply)
  }
  $('new').onclick = () => setGame(START, [], 0)
  $('copy').onclick = () => navigator.clipboard?.writeText(location.href)
  $('fen-form').onsubmit = (event) => {
    event.preventDefault()
    const fen = $('fen').value.trim()
    api('/v1/analyse', {fen}).then(() => setGame(fen, [], 0), showError)
  }
  $('pgn-form').onsubmit = (event) => {
    event.preventDefault()
    api('/v1/pgn', {pgn: $('pgn').value}).then((game) => setGame(game.fen, game.moves, 0), showError)
  }
  $('moves').tBodies[0].onclick = (event) => {
    const row = event.target.closest('tr')
    const analysis = state.analyses[state.ply]
    const move = row && analysis?.moves.find((m) => m.uci === row.dataset.uci)
    if (move && document.body.dataset.busy !== 'true') play(move.uci, move.san)
  }
  $('game').onclick = (event) => { if (event.target.dataset.ply) show(Number(event.target.dataset.ply)) }
  $('graph').onclick = (event) => {
    const box = $('graph').getBoundingClientRect()
    show(Math.round(((event.clientX - box.left) / box.width) * state.moves.length))
  }
  document.addEventListener('keydown', (event) => {
    if (['INPUT', 'TEXTAREA', 'SELECT'].includes(event.target.tagName)) return
    const keys = {ArrowLeft: state.ply - 1, ArrowRight: state.ply + 1, Home: 0, End: state.moves.length}
    if (event.key in keys) { event.preventDefault(); show(keys[event.key]) }
    if (event.key === 'f') $('flip').click()
    const mark = MARKS.find(([, , key]) => key === event.key.toLowerCase())
    if (mark && !event.ctrlKey && !event.metaKey && !event.altKey) {  // b m i: the next one; with shift, the last.
      const ply = markedPly(state.review, state.ply, mark[0], event.shiftKey ? -1 : 1)
      if (ply !== null) show(ply)
    }
    if (event.key === '?') $('help').hidden = !$('help').hidden
    if (event.key === 'Escape') $('help').hidden = true
  })
  $('help').onclick = () => { $('help').hidden = true }
  window.addEventListener('hashchange', () => {  // A link edited in the tab: a new game, or another ply or side.
    const link = readLink(location.hash.slice(1), START)
    const same = link.moves.map((m) => m.uci).join(',') === state.moves.map((m) => m.uci).join(',')
      && link.fen === state.startFen
    if (!same || link.problem) {
      loadFromUrl()
      return
    }
    if (link.side !== state.side) setSide(link.side)
    show(link.ply)
  })
}

async function main() {
  board = new Chessboard($('board'), {
    position: START,
    assetsUrl: '/page/vendor/cm-chessboard/assets/',
    style: {borderType: 'none', showCoordinates: true, animationDuration: 150},
  })
  board.enableMoveInput(onMoveInput)
  wire()
  for (;;) {
    const ready = await fetch('/health/ready')
    if (ready.ok) break
    setStatus('compiling the model…')
    await new Promise((resolve) => setTimeout(resolve, 1000))
  }
  state.info = await api('/v1/info')
  $('model').textContent = `${state.info.model} (${state.info.policy})`
  if (state.info.play) {
    $('play').insertAdjacentHTML('beforeend', `<label><input type="checkbox" id="use-search"> the model searches
      (${state.info.play})</label>`)
  }
  setStatus('ready')
  await loadFromUrl()
}

main().catch(showError)
