"""Word lists for memento_shared.text.entities (issue 28 item 3): kept apart so the extractor's code stays readable.

All lists are small on purpose: they hold the words that most often look like names and are not (capitalised words at
a sentence start, Korean nouns that take the same particles as a name), not a lexicon. The last lists, the kinds of
thing that are not names (text.links), leave out words of software talk, as Memento is a coding agents' store first.
"""

from __future__ import annotations

from memento_shared.text.keywords import STOPWORDS

MONTHS = frozenset(
    "january february march april may june july august september october november december"
    " jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
WEEKDAYS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun".split()
)

# Capitalised words that are not names: sentence openers, pronouns, interjections, imperatives, time words. A word here
# is never a name on its own; "The" in "The Beatles" is dropped and "Beatles" kept.
COMMON_CAPITALISED = (
    frozenset(
        """i i'm i've i'll i'd im ive ill id me my mine we us our you your he him his she her it its they them their
    a an the this that these those there here what when where which who whom whose why how whatever whenever
    and but or nor so yet for if then than because although though while since until unless also
    is are was were be been am do does did have has had can could will would shall should may might must
    not no yes yeah yep nope ok okay oh ah aw aww wow hey hi hello hmm um uh well thanks thank please sorry
    great good nice cool awesome amazing wonderful lovely glad happy sure right totally really absolutely exactly
    congrats congratulations cheers bye goodbye welcome dear
    just only even still already always never sometimes often maybe perhaps actually definitely probably
    today tonight yesterday tomorrow now later soon recently lately last next this every each all some any
    after before during about above below with without from into onto over under at by on in of to up down out
    tell show find list give describe explain remind recall name summarize summarise let let's lets make take
    get go went going come came see look looking check try keep remember note
    one two three four five six seven eight nine ten first second third another other both many much more most
    anyway besides however instead otherwise meanwhile finally also plus btw lol omg haha
    mr mrs ms miss dr prof sir madam st mt jr sr""".split()
    )
    | MONTHS
    | WEEKDAYS
)

# All-capital abbreviations that say nothing about who or where.
COMMON_ACRONYMS = frozenset(
    "ok tv pc id am pm fyi asap lol omg btw diy faq ps nb utc gmt etc aka vs rsvp tbh imo imho idk".split()
)

# Titles before a name ("Dr. Smith"): dropped, and the next word is not a sentence start.
TITLES = frozenset("mr mrs ms dr prof sir st mt".split())

# Words joining the parts of one name ("Bank of America", "Leonardo da Vinci").
CONNECTORS = frozenset("of de da del della der van von du la le y".split())

# A "Name:" at the start of a text that is a label, not a speaker.
HEADER_LABELS = frozenset(
    """note notes todo to-do update summary reminder question answer q a re fwd fw fyi warning error tip step example
    decision context important edit subject title source status result results goal task problem solution issue bug
    fix idea ps nb lesson rule policy memo info warning caution hint tldr tl;dr action outcome conclusion
    메모 참고 요약 결론 질문 답변 주의 할일 결정 문제 해결 목표 요청 결과 공지""".split()
)

# Words that end a keyphrase as a stopword does: frequent verbs, adverbs and adjectives of chat.
KEYPHRASE_STOP = (
    STOPWORDS
    | COMMON_CAPITALISED
    | frozenset(
        """went go goes going gone get gets got getting make makes made making take takes took taken think thinks
    thought know knows knew feel feels felt love loves loved like liked likes want wants wanted need needs needed
    see sees saw seen met meet meets say says said tell told come comes came try tried trying keep kept find found
    give gave
    look looked looks start started starting finish finished help helped use used doing done been having
    lot lots thing things something anything everything nothing someone anyone everyone way ways kind sort bit
    really very so too also just still always never pretty quite super totally definitely actually probably
    great good nice cool awesome amazing wonderful fun glad happy sad sure excited proud cute beautiful
    day days time times week weeks year years month months ago yesterday today tomorrow tonight weekend
    lately recently since last next new old big little small much many more most least one two three
    i'm i've i'll i'd it's that's there's what's let's can't don't didn't won't isn't wasn't couldn't
    yeah yes oh wow hey thanks thank yep hmm""".split()
    )
)

# Korean --------------------------------------------------------------------------------------------------------------

# After a Korean noun or name: particles ("민수는", "서울에서"), longest first so "이랑" wins over "랑".
KO_PARTICLES = (
    "에서는",
    "에게서",
    "으로는",
    "한테서",
    "께서는",
    "께서",
    "께",
    "이랑은",
    "이랑",
    "에게",
    "한테",
    "하고",
    "처럼",
    "까지",
    "부터",
    "이는",
    "이가",
    "이를",
    "이의",
    "이도",
    "이와",
    "이야",
    "에서",
    "으로",
    "에는",
    "보다",
    "에",
    "로",
    "만",
    "랑",
    "이",
    "가",
    "은",
    "는",
    "을",
    "를",
    "의",
    "와",
    "과",
    "도",
    "야",
    "아",
)
# The particles that follow a person ("민수는", "지연이랑", "철수한테"); a word before the others ("정상에서") is a name
# only when it is listed.
KO_PERSON_PARTICLES = frozenset(
    """께서는 께서 께 이랑은 이랑 에게 한테 에게서 한테서 하고 처럼 이는 이가 이를 이의 이도 이와 이야 랑 이 가 은 는 을
    를 의 와 과 도 야 아""".split()
)
# Honorifics: a word before them is a name unless it is a title ("선생님").
KO_HONORIFICS = ("씨", "님")
KO_TITLES = frozenset(
    """선생 사장 부장 과장 차장 팀장 실장 대리 교수 원장 회장 이사 고객 손 스 하느 하나 주인 어머 아버 형 누 언니 오빠
    선배 후배 기사 작가 목사 신부 의사 간호사 변호사 대표 상무 전무 본부장 소장 반장 총장 여러분 당신 자기""".split()
)

# Common Korean surnames (one syllable), for full names "김민수".
KO_SURNAMES = frozenset(
    """김 이 박 최 정 강 조 윤 장 임 한 오 서 신 권 황 안 송 류 유 전 홍 고 문 양 손 배 백 허 남 심 노 하 곽 성
    차 주 우 구 민 진 나 지 엄 채 원 천 방 공 현 함 변 염 여 추 도 소 석 선 설 마 길 연 위 표 명 기 반 왕 금
    옥 육 인 맹 제 모 탁 국 어 은 편 용 예 경 봉 사 부""".split()
)

# Syllables that Korean given names are commonly made of. A two-syllable word made only of these, before a particle, is
# taken for a name ("민수는", "지연이랑"); the nouns that also are (수영, 상태, ...) are in KO_NOT_NAMES.
KO_NAME_SYLLABLES = frozenset(
    """민 수 지 영 현 준 서 연 윤 은 혜 진 희 정 우 재 성 호 훈 경 주 아 하 예 유 나 다 소 미 선 태 동 상 승 원 석 철
    용 빈 혁 규 환 기 찬 종 명 근 섭 욱 인 열 택 헌 효 채 율 린 름 별 솔 슬 빛 보 람 한 가 도 건 결 겸 균 길 남 담 란
    래 령 록 륜 린 무 문 범 병 봉 순 숙 시 신 실 안 애 양 언 엽 옥 완 운 웅 월 위 익 일 임 자 장 전 제 조 중 창 천 초
    춘 충 탁 필 해 향 협 형 홍 화 휘 흠 흥""".split()
)

# Korean nouns that take particles and are made of name syllables, and words that are never names.
KO_NOT_NAMES = frozenset(
    """우리 저희 너희 그녀 그들 자기 누구 여기 거기 저기 이것 그것 저것 무엇 오늘 내일 어제 지금 요즘 나중 처음 다음
    수영 상태 성공 진심 민주 현재 인정 수정 소원 영상 영화 주민 지원 준비 성장 진행 소개 선물 상자 정도 수준 경우 연구
    주제 민원 동생 형제 자매 남편 아내 아들 딸 가족 친구 동료 선배 후배 사람 아이 애들 학생 선생 회사 학교 집 일 시간
    기분 생각 사랑 행복 가정 결혼 연애 운동 공부 여행 음식 요리 노래 음악 그림 사진 책 영어 한국 국어 수학 과학 역사
    미술 체육 주말 연말 연초 하루 이틀 한번 한달 일년 정말 진짜 너무 아주 조금 많이 모두 전부 자신 상대 상황 문제 해결
    조건 결과 원인 이유 방법 계획 목표 의견 생각 기억 추억 경험 시작 마지막 주문 전화 문자 메일 연락 약속 모임 회의
    보고 결정 선택 변화 효과 영향 안전 건강 병원 약국 은행 시장 가게 식당 카페 공원 도서관 지하철 버스 택시 기차
    비행기 자동차 자전거 서버 데이터 코드 버그 배포 테스트 설정 기능 화면 사용자 고객 제품 서비스 가격 비용 수익 매출
    주식 투자 경제 정치 사회 문화 교육 환경 기술 과정 단계 부분 전체 이상 이하 이후 이전 동안 사이 대신 정리 인사 선거
    수업 학원 숙제 시험 성적 점수 졸업 입학 취업 이직 퇴근 출근 휴가 휴일 명절 생일 기념일 축하 감사 미안 부탁 도움
    우정 인연 용기 희망 재미 흥미 관심 취미 자유 평화 정의 진실 신념 신앙 종교 교회 성당 사원
    전시 공연 영화관 극장 정상 진학 성인 현상 주장 주인 수면 승진 동의 경영 운영 지정 지방 선수 우승 연승 영업 상승 소유
    주유 소송 경유 도전 도서 주소 지도 보도 수도 한도 정보 정원 운명 연주 주연 조연 성수 용도 정석 인도 유지
    원정 성향 운세""".split()
)

# Korean places and organisations common enough to list: found before any particle.
KO_PLACES = frozenset(
    """서울 부산 대구 인천 광주 대전 울산 세종 제주 제주도 경기도 강원도 강남 강북 홍대 판교 분당 수원 성남 일산 해운대
    경주 전주 여수 속초 춘천 한국 일본 중국 미국 영국 프랑스 독일 캐나다 호주 베트남 태국 대만 홍콩 싱가포르 유럽 아시아
    도쿄 오사카 교토 뉴욕 파리 런던 베를린 베이징 상하이 방콕 하와이""".split()
)
KO_KNOWN_NAMES = KO_PLACES | frozenset(
    """삼성 현대 카카오 네이버 쿠팡 배민 구글 애플 아마존 넷플릭스 유튜브 인스타그램 페이스북 스타벅스""".split()
)

# Places a name is taken to be wherever it stands (text.links): countries, US states, regions and large cities, lower
# case; a name of several words counts when one of its words is listed ("New York City", "Smoky Mountains" by its cue).
PLACES = frozenset(
    """afghanistan africa alabama alaska amsterdam argentina arizona arkansas asia athens atlanta austin australia
    austria bali bangkok barcelona beijing belgium berlin boston brazil brooklyn budapest cairo california canada
    cancun caribbean chicago chile china colorado connecticut copenhagen croatia cuba dallas delaware denmark denver
    detroit dubai dublin edinburgh egypt england europe finland florida france georgia germany greece hawaii hollywood
    houston hungary iceland idaho illinois india indiana indonesia iowa iran iraq ireland israel istanbul italy jamaica
    japan kansas kentucky kenya korea lisbon london louisiana madrid maine manhattan maryland massachusetts melbourne
    mexico miami michigan minnesota mississippi missouri montana montreal morocco moscow nashville nebraska nepal
    netherlands nevada nigeria norway ohio oklahoma oregon orlando paris pennsylvania peru philadelphia philippines
    phoenix poland portland portugal prague quebec rome russia scotland seattle seoul singapore spain stockholm sweden
    switzerland sydney taiwan tennessee texas thailand tokyo toronto turkey ukraine utah vancouver vegas vermont venice
    vienna vietnam virginia wales washington wisconsin wyoming yellowstone yosemite""".split()
)

# Korean verb and adjective endings: a word ending so is not the first noun of a keyphrase.
KO_VERB_ENDINGS = (
    *("다", "요", "고", "서", "면", "게", "지", "어", "아", "네", "데", "죠", "까", "며", "도록", "니"),
    *("해", "한", "된", "던", "할", "될", "씩"),  # "대해", "발표한 정책", "시간씩": not nouns either
)

# Kinds of thing that are not names (text.links, issue 53): words that mark a memory as naming an activity, an event,
# a food, an animal or an instrument, so a list question about one ("What activities has Mel done?") reaches the
# memories that name any ("I'm off to go swimming with the kids"). Compared by their stems; English, then Korean.
# Words that are mostly something else in conversation are left out: "run" (a business), "show", "talk", "march",
# "drive", "fair", "read", "walk", "draw" (drawn to); in Korean 기타 (also "other"), 경기 (also the economy), 사진,
# 개, 새, 말.
# Memento is a coding agents' store first, so words of software talk are left out too (a race condition is no event):
# event 이벤트 (event loop), race, party 파티 (third party), performance, convention, rally, screening, gig, exhibit,
# exercise (a code path), climbing and hunting (the stack, a bug), boxing (a value), fencing (memory), cycling (cycles),
# journaling (a file system), sketching (a design), wrestling (with a tool), poetry (the packager), cookie 쿠키, curry,
# recipe (a build's), pie 파이 (a chart), soup, cat (the command), pet (project), rabbit (hole), snake (case), 게임 (a
# game server), 그림 (a figure), 헬스 (a health check). A word whose stem is a software word counts only as written
# (AS_WRITTEN): "painting" but not "paint", "rowing" but not "row", "wedding" but not "Wed".
ACTIVITY_WORDS = frozenset(
    """hike hiking camping camp swim swimming surf surfing ski skiing snowboarding skate skating kayak kayaking canoe
    canoeing sailing fishing biking jogging yoga pilates gym workout weightlifting kickboxing karate judo taekwondo
    archery dance dancing ballet salsa singing painting paintings pottery ceramics sculpting knitting crochet sewing
    quilting woodworking photography gardening baking volunteering chess puzzles gaming golf tennis soccer football
    basketball baseball volleyball hockey badminton rugby cricket bowling marathon triathlon meditation picnic roadtrip
    museum concert festival beach horseback skateboarding rowing scuba snorkeling birdwatching stargazing
    등산 하이킹 캠핑 수영 서핑 스키 스케이트 카약 낚시 클라이밍 자전거 조깅 요가 필라테스 운동 복싱 태권도 춤 댄스
    발레 노래 도예 뜨개질 정원 베이킹 봉사 체스 골프 테니스 축구 농구 야구 배구 볼링 마라톤 명상 소풍
    박물관 공연 축제 해변""".split()
)
EVENT_WORDS = frozenset(
    """festival concert parade conference fundraiser fundraising charity gala marathon workshop seminar meetup protest
    exhibition exhibitions competition tournament contest ceremony wedding weddings celebration recital auction premiere
    reunion retreat
    행사 축제 콘서트 공연 퍼레이드 학회 컨퍼런스 모금 자선 마라톤 워크숍 세미나 모임 집회 전시회 대회 토너먼트
    결혼식 기념식 시상식""".split()
)
FOOD_WORDS = frozenset(
    """cake bread muffin cupcake brownie pastry dessert pasta pizza salad stew sandwich tacos burger sushi pancakes
    waffles smoothie chocolate pudding tart cheesecake lasagna casserole baking
    레시피 요리 케이크 빵 머핀 디저트 파스타 피자 수프 샐러드 카레
    샌드위치 버거 초밥 김치 떡볶이 비빔밥""".split()
)
ANIMAL_WORDS = frozenset(
    """dog puppy kitten turtle bird parrot hamster bunny horse lizard
    반려동물 강아지 고양이 거북이 앵무새 햄스터 토끼""".split()
)
INSTRUMENT_WORDS = frozenset(
    """guitar piano violin cello drums flute clarinet saxophone trumpet ukulele harp banjo harmonica
    피아노 바이올린 첼로 드럼 플루트 색소폰 트럼펫 우쿨렐레""".split()
)
# Listed words compared as written, not by their stems, which are words of software talk: paint (a browser's), game
# (a game loop), fish (the shell), bake (baked into an image), puzzl (puzzled), stargaz (GitHub's stargazers), row,
# exhibit (exhibits a bug), wed (a log line's date).
AS_WRITTEN = frozenset(
    "painting paintings gaming fishing baking puzzles stargazing rowing exhibition exhibitions wedding weddings".split()
)
