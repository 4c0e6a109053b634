"""The review app's routes, one router per group (`mining.stages.review.app` joins them):
`pages` (the page and the queue it shows: who votes, landmarks, items, where to resume),
`votes` (a vote, a bulk vote, undo) and `images` (thumbnails, full images, query crops and
the geometric matches); `shared` holds what they all use (the app's settings, a database
connection per worker thread, the reviewer a request speaks for).
"""
